"""Chapter 2's design problems: what a training or inference step sends, and what it costs.

Each check takes the reader's numbers and choice, computes the expected ones
from the collectives' records (:mod:`mycollectives.collectives`: the bytes
a rank must move) and the link figures of :data:`~mycollectives.book.exercises.primitives.LINKS`, and
explains a typical wrong answer: a ring's bytes counted as ``2n``, the
second all-gather of FSDP forgotten, NCCL's base latency charged per step.
"""

from __future__ import annotations

from ...collectives import COLLECTIVE
from .answers import exercise, expect, near, need, number, passed
from .primitives import LINKS


def data_parallel_bytes(params: float, world_size: int, itemsize: int = 2) -> dict[str, float]:
    """Bytes each rank sends per step: DDP's all-reduce of the gradients against
    FSDP's (ZeRO-3's) all-gather of the parameters in the forward pass, again in
    the backward pass, and reduce-scatter of the gradients."""
    n, p = params * itemsize, world_size
    ag, rs, ar = (COLLECTIVE[c].bound(p) * n for c in ("all_gather", "reduce_scatter", "all_reduce"))
    return {"ddp": ar, "fsdp": 2 * ag + rs}


def _dp_bytes(answer: object, want: float, name: str, params: float, p: int) -> str:
    what = f"bytes each rank sends per step, {name.upper()}"
    got = number(answer, what)
    n = 2 * params
    ar = COLLECTIVE["all_reduce"].bound(p) * n
    if near(got, 2 * n, 1e-3) and name == "ddp":
        raise AssertionError(
            f"{what}: 2n counts every byte twice over; a rank sends 2(p-1)/p of the vector ({ar:.4g} B)"
        )
    if near(got, 2 * want, 1e-3):
        raise AssertionError(f"{what}: bf16 gradients and parameters are 2 bytes each, not 4")
    if name == "fsdp" and near(got, ar, 1e-3):
        raise AssertionError(
            f"{what}: that is DDP's traffic; FSDP frees each layer's gathered parameters after its "
            "forward, so the backward pass gathers them again: two all-gathers and a reduce-scatter"
        )
    return expect(got, want, what, rel=1e-3, hint="each collective moves (p-1)/p of its size per rank")


@exercise
def check_dp_design(
    choice: str | None,
    ddp_bytes: float | None,
    fsdp_bytes: float | None,
    params: float = 7e9,
    world_size: int = 8,
    hbm_bytes: float = 80e9,
) -> None:
    """Chapter 2's first design problem: DDP or FSDP for ``params`` parameters on
    ``world_size`` GPUs of ``hbm_bytes``, and each one's bytes per rank and step."""
    need(choice, '"ddp" or "fsdp"')
    want = data_parallel_bytes(params, world_size)
    lines = [
        _dp_bytes(ddp_bytes, want["ddp"], "ddp", params, world_size),
        _dp_bytes(fsdp_bytes, want["fsdp"], "fsdp", params, world_size),
    ]
    assert choice in ("ddp", "fsdp"), f'choose "ddp" or "fsdp", not {choice!r}'
    state = 16 * params
    assert choice == "fsdp", (
        f"DDP sends less, but it keeps the whole training state on every GPU: 16 bytes x {params:.3g} "
        f"= {state / 1e9:.0f} GB, more than a GPU's {hbm_bytes / 1e9:.0f} GB; FSDP keeps "
        f"{state / world_size / 1e9:.0f} GB on each"
    )
    lines.append(
        f"Correct: FSDP, for {want['fsdp'] / want['ddp']:.1f}x DDP's traffic; DDP's state does not fit"
    )
    passed(*lines)


def tp_decode_times(
    layers: int = 80, hidden: int = 8192, tokens: int = 8, world_size: int = 8, link: str = "nvlink4"
) -> tuple[float, float, str]:
    """One ring all-reduce of a decode step's activations (``tokens x hidden`` in bf16)
    with NCCL's latencies, the time of the two per layer over every layer, and
    which term dominates (``"latency"`` or ``"bandwidth"``)."""
    lk, p = LINKS[link], world_size
    n = tokens * hidden * 2
    steps = 2 * (p - 1)
    one = lk.collective_time(steps, n / p)
    latency = lk.base + steps * lk.step
    return one, 2 * layers * one, "latency" if latency > one - latency else "bandwidth"


@exercise
def check_tp_decode(t_allreduce: float | None, t_token: float | None, bound: str | None) -> None:
    """Chapter 2's second design problem: tensor-parallel decoding on 8 GPUs of an
    NVLink 4 node, 80 layers of width 8192, 8 tokens per step, a ring all-reduce
    after attention and after the MLP of every layer."""
    one, token, want_bound = tp_decode_times()
    lk, p = LINKS["nvlink4"], 8
    n = 8 * 8192 * 2
    what = "one all-reduce (s)"
    got = number(t_allreduce, what)
    if near(got, 2 * (p - 1) * (lk.alpha + n / p * lk.beta), 0.02):
        raise AssertionError(
            f"{what}: NCCL charges its base latency once per call, not on each of the 14 steps"
        )
    if near(got, lk.collective_time(2 * (p - 1), n), 0.02):
        raise AssertionError(f"{what}: each ring step carries one chunk of n/p bytes, not the whole vector")
    lines = [expect(got, one, what, rel=0.02, hint="base + 2(p-1) (step + n/p beta)")]
    tok = number(t_token, "all-reduces of one decode step (s)")
    if near(tok, token / 2, 0.02):
        raise AssertionError("a Megatron layer all-reduces twice: after attention and after the MLP")
    lines.append(expect(tok, token, "all-reduces of one decode step (s)", rel=0.02))
    need(bound, '"latency" or "bandwidth"')
    assert bound == want_bound, (
        f"of {one * 1e6:.1f} us per all-reduce, {(lk.base + 14 * lk.step) * 1e6:.1f} us are latency: "
        f"the step is {want_bound}-bound"
    )
    lines.append(f"Correct: {want_bound}-bound; fewer steps, not more bandwidth, would help")
    passed(*lines)


__all__ = ["check_dp_design", "check_tp_decode", "data_parallel_bytes", "tp_decode_times"]
