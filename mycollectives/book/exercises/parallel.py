"""Check functions for the exercises of chapter 5 (what each parallelism communicates).

Each ``check_*`` prints "not answered yet" while the answer is still the
page's placeholder (``None``, or a function whose body is ``...``), raises
``AssertionError`` saying what is wrong, or prints what was right. Numbers
come from the package's calculator (``mycollectives.steptime``), so the
notebook shows the question and not the answer. The design checks accept
any layout that is valid, uses every GPU, keeps the batch, fits in memory,
and whose step the calculator prices (compute at the GPU's bf16 peak)
within the problem's ``slack`` of the fastest layout its search finds; a
slower one is told where its step loses the most time against the fastest.
The long-context problem allows 35 %: the calculator charges a pipeline the
textbook bubble ``(pp - 1) / (v m)``, and Llama 3's own layout at 128K
tokens (TP 8, CP 16, PP 16, DP 8; Dubey et al. 2024, 380 TFLOP/s per GPU)
sits 30 % from its fastest. The mixture-of-experts problem rules out pipelines.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from ...memory.vendor import H100
from ...steptime import costs, traffic
from ...steptime.calculator import StepReport, step_time
from ...steptime.config import LLAMA3_8B, LLAMA3_70B, LLAMA3_405B, MIXTRAL_8X7B, ModelConfig
from ...steptime.layout import Layout
from ...steptime.search import search
from ...topology import cluster
from ...transport import LocalWorld
from .answers import correct

NOT_ANSWERED = "not answered yet: "
GPUS_PER_NODE = 8  # DGX H100, the design problems' node
# The design problems price compute at the H100's dense bf16 peak, as the chapter's worked
# layouts do: a lower bound on each step, which weighs communication at its heaviest.
PEAK = dict(compute_rate=H100.peak_flops["bf16"])


def unanswered(answer: object, what: str) -> bool:
    """Print "not answered yet" (and nothing about the answer) while ``answer`` is the placeholder."""
    if answer is None or answer is Ellipsis:
        print(f"{NOT_ANSWERED}{what}")
        return True
    return False


# --- numbers ---------------------------------------------------------------------------


def tp_bytes(model: ModelConfig = LLAMA3_70B, tp: int = 8) -> float:
    """Bytes one GPU sends per step for TP's all-reduces: one micro-batch of one sequence."""
    lay = Layout(tp=tp)
    c = next(c for c in traffic.comms(model, lay) if c.strategy == "TP")
    return costs.cost(c, lay, costs.Links.of(cluster("dgx_h100", 2))).nvlink_bytes * c.calls


def check_tp_bytes(answer: float | None) -> None:
    """Chapter 5: TP's bytes per GPU and step for Llama 3 70B, tp=8, one 8192-token sequence."""
    if unanswered(answer, "set tp_step_bytes to the bytes one GPU sends per step"):
        return
    want = tp_bytes()
    m = LLAMA3_70B
    n = m.seq * m.hidden * m.act_bytes
    if math.isclose(float(answer), want / 2, rel_tol=0.01):
        raise AssertionError("that is the forward pass only: the backward pass all-reduces as often")
    if math.isclose(float(answer), 4 * m.layers * n, rel_tol=0.01):
        raise AssertionError(
            "that counts the whole buffer per all-reduce; a ring all-reduce makes each rank send 2(t-1)/t of it"
        )
    correct(answer, want, "TP bytes per GPU per step", " B")


def fsdp_network_bytes(model: ModelConfig = LLAMA3_8B, gpus: int = 64) -> float:
    """Bytes one GPU sends into the network per step for ZeRO-3 over ``gpus`` GPUs, one micro-batch."""
    lay = Layout(dp=gpus, zero=3)
    links = costs.Links.of(cluster("dgx_h100", 2))
    return sum(costs.cost(c, lay, links).network_bytes * c.calls for c in traffic.comms(model, lay))


def check_fsdp_network_bytes(answer: float | None, model: ModelConfig = LLAMA3_8B, gpus: int = 64) -> None:
    """Chapter 5: ZeRO-3 of ``model`` on ``gpus`` H100s in DGX nodes: bytes per GPU into the network."""
    if unanswered(answer, "set fsdp_net_bytes to the bytes one GPU sends into the network per step"):
        return
    want = fsdp_network_bytes(model, gpus)
    psi = model.params * model.param_bytes
    flat = 3 * (gpus - 1) / gpus * psi
    if math.isclose(float(answer), flat, rel_tol=0.01):
        raise AssertionError(
            "that is what a flat ring would put through every GPU's NIC; with 8 ranks per node the "
            "gathers go two-level, and each GPU carries 1/8 of the inter-node part"
        )
    if math.isclose(float(answer), want * 2 / 3, rel_tol=0.01):
        raise AssertionError(
            "ZeRO-3 gathers the parameters twice (forward, backward) besides the reduce-scatter"
        )
    correct(answer, want, "FSDP bytes per GPU into the network per step", " B")


# --- implement: the collective matmul --------------------------------------------------


def check_collective_matmul(fn: Callable, world_sizes=(1, 2, 3, 4)) -> None:
    """Chapter 5: ``fn(x, w)`` returns ``all_gather(x) @ w`` by ``p - 1`` ring steps of send/recv.

    Sends are rendezvous (they complete when the receiver has posted its
    receive), so an order that only works with buffered sends hangs, and is
    reported. Each rank must send exactly ``p - 1`` messages, with no collective.
    """
    probe = torch.zeros(1, 1, dtype=torch.float64)
    try:
        unwritten = LocalWorld(1).run(lambda rank: fn(probe, probe))[0] in (None, Ellipsis)  # a body of `...`
    except NotImplementedError:  # the page's placeholder
        unwritten = True
    if unwritten:
        print(f"{NOT_ANSWERED}write the body of the function (it returns None)")
        return
    for p in world_sizes:
        world = LocalWorld(p, timeout=5.0, eager_bytes=0)

        def body(rank: int):
            g = torch.Generator().manual_seed(rank)
            x = torch.randn(3, 4, generator=g, dtype=torch.float64)
            w = torch.randn(4, 5, generator=torch.Generator().manual_seed(99), dtype=torch.float64)
            return fn(x, w)

        try:
            out = world.run(body, join_timeout=30)
        except Exception as e:  # noqa: BLE001 - the reader's error, explained
            raise AssertionError(f"on {p} ranks your function raised {type(e).__name__}: {e}") from None
        xs = [
            torch.randn(3, 4, generator=torch.Generator().manual_seed(r), dtype=torch.float64)
            for r in range(p)
        ]
        w = torch.randn(4, 5, generator=torch.Generator().manual_seed(99), dtype=torch.float64)
        want = torch.cat(xs) @ w
        for r, got in enumerate(out):
            assert isinstance(got, torch.Tensor) and got.shape == want.shape, (
                f"on {p} ranks, rank {r} returned {type(got).__name__} "
                f"{tuple(getattr(got, 'shape', ()))}; expected a tensor of shape {tuple(want.shape)}"
            )
            if not torch.allclose(got, want):
                bad = int((got - want).abs().amax(dim=1).argmax())
                raise AssertionError(
                    f"on {p} ranks, rank {r}: row {bad} (rank {bad // 3}'s block) is wrong; "
                    "at step j a rank holds the block of rank (r - j) mod p"
                )
        used = {e.collective for e in world.trace} - {"send"}
        assert not used, f"your function called {sorted(used)}; use mc.isend and mc.irecv only"
        for r in range(p):
            n = sum(1 for e in world.trace if e.src == r)
            assert n == p - 1, f"on {p} ranks, rank {r} sent {n} messages; the ring needs p - 1 = {p - 1}"
    print(f"Correct: the collective matmul agrees on {list(world_sizes)} ranks, p - 1 messages per rank")


# --- design problems ---------------------------------------------------------------------

DESIGNS = {
    "70b": dict(model=LLAMA3_70B, gpus=512, sequences=512, grid={}, slack=0.15),
    "405b-long": dict(
        model=LLAMA3_405B.with_seq(131072),
        gpus=16384,
        sequences=128,
        grid=dict(cp=(1, 2, 4, 8, 16, 32), pp=(1, 2, 4, 8, 16, 32)),
        slack=0.35,
    ),
    "moe": dict(model=MIXTRAL_8X7B, gpus=32, sequences=256, grid=dict(ep=(1, 2, 4, 8), pp=(1,)), slack=0.15),
}


def design(name: str) -> list[StepReport]:
    """The calculator's search for design problem ``name``, fastest first."""
    d = DESIGNS[name]
    return search(d["model"], d["gpus"], d["sequences"], cluster("dgx_h100", 2), step_kw=PEAK, **d["grid"])


def check_design(name: str, layout: Layout | None, slack: float | None = None) -> StepReport | None:
    """Chapter 5: ``layout`` solves design problem ``name`` within ``slack`` of the fastest found
    (default: the problem's own, see the module docstring)."""
    if unanswered(layout, "set the layout to a mycollectives.steptime.layout.Layout"):
        return None
    d = DESIGNS[name]
    slack = d["slack"] if slack is None else slack
    model, gpus, sequences = d["model"], d["gpus"], d["sequences"]
    assert isinstance(layout, Layout), (
        f"expected a mycollectives.steptime.layout.Layout, got {type(layout).__name__}"
    )
    assert layout.world == gpus, f"{layout.describe()} uses {layout.world} GPUs; the cluster has {gpus}"
    batch = layout.dp * layout.microbatches * layout.micro_batch
    assert batch == sequences, (
        f"{layout.describe()}: dp x microbatches x micro_batch = {batch} sequences per step; "
        f"the batch is {sequences}"
    )
    try:
        layout.check(model)
    except ValueError as e:
        raise AssertionError(str(e)) from None
    if layout.tp > GPUS_PER_NODE:
        raise AssertionError(
            f"tp={layout.tp} spans {layout.tp // GPUS_PER_NODE} nodes: tensor parallelism's collectives sit on "
            f"the critical path of every layer; keep its group inside a node's {GPUS_PER_NODE} GPUs (NVLink)"
        )
    if name == "moe" and layout.pp > 1:
        raise AssertionError("this problem rules out pipeline parallelism: use tp, ep and ZeRO")
    mine = step_time(model, layout, cluster("dgx_h100", 2), **PEAK)
    assert mine.fits, (
        f"{layout.describe()} needs {mine.memory['total'] / 1e9:.0f} GB per GPU, more than the H100's "
        f"{mine.gpu.hbm_bytes / 1e9:.0f}: {', '.join(f'{k} {v / 1e9:.0f} GB' for k, v in mine.memory.items())}"
    )
    best = design(name)[0]
    assert mine.step <= best.step * (1 + slack), (
        f"{layout.describe()} takes {mine.step:.2f} s per step, {100 * (mine.step / best.step - 1):.0f} % "
        f"more than the fastest layout found; {losses(mine, best)}"
    )
    print(mine.table())
    print(f"Correct: within {100 * slack:.0f} % of the fastest layout found ({best.layout.describe()})")
    return mine


def losses(mine: StepReport, best: StepReport) -> str:
    """Where ``mine`` loses the most time against ``best``: compute, a strategy's exposed calls, the bubble."""

    def parts(r: StepReport) -> dict[str, float]:
        out = {"compute": r.compute, "the pipeline bubble": r.bubble}
        for strategy, d in r.by_strategy().items():
            out[f"exposed {strategy} communication"] = d["exposed"]
        return out

    a, b = parts(mine), parts(best)
    gaps = {k: a.get(k, 0.0) - b.get(k, 0.0) for k in a.keys() | b.keys()}
    worst = max(gaps, key=gaps.__getitem__)
    why = " (full recomputation runs the forward pass again)" if worst == "compute" else ""
    return f"it loses the most to {worst}{why}: {a.get(worst, 0.0):.2f} s against {b.get(worst, 0.0):.2f} s"


__all__ = [
    "MIXTRAL_8X7B",
    "check_collective_matmul",
    "check_design",
    "check_fsdp_network_bytes",
    "check_tp_bytes",
    "design",
    "fsdp_network_bytes",
    "losses",
    "tp_bytes",
    "unanswered",
]
