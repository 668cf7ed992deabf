"""A DDP step on the virtual cluster against chapter 5's step-time calculator (the virtual cluster's page).

:func:`measure` runs ``torch``'s ``DistributedDataParallel`` on a model
(lab 4's MLP on the page) on the GPUs of a virtual DGX node or two, and
times one step after two warm-up steps (DDP rebuilds its buckets after the
first). Each bucket's all-reduce is the package's, posted asynchronously by
a communication hook, with the algorithm the calculator's simulator prices:
the ring on one node, the hierarchical all-reduce across nodes.

:func:`compare` feeds the calculator as practitioners do: one GPU's step
gives the compute rate (the model's FLOPs per step over that time). On the
virtual cluster that step is itself virtual, so the rate is the roofline's
own, not a measurement. The calculator (:func:`~mycollectives.steptime.dense.data_parallel_step`)
then predicts the step on more GPUs from that rate, DDP's buckets and the
topology, and the virtual cluster runs it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.distributed as dist
from torch import nn

from ..api import all_reduce
from ..ops import ReduceOp
from ..steptime.dense import DenseModel, data_parallel_step
from ..steptime.layout import Layout
from ..virtual import clock
from ..virtual.runner import run, topology_of

Build = Callable[[int, int], nn.Module]  # (width, depth) -> the model, the same on every rank


def algorithm_for(nodes: int) -> str:
    """The all-reduce the calculator's simulator prices (``steptime.groupsim``): ring inside one node,
    hierarchical when the group spans several nodes with several GPUs on each."""
    return "hierarchical" if nodes > 1 else "ring"


def _hook(algorithm: str, sizes: list[int]):
    from ..torchpg import TorchWork

    def hook(state, bucket):  # no annotations: DDP inspects them
        buf = bucket.buffer()
        sizes.append(buf.numel() * buf.element_size())
        work = TorchWork(
            [all_reduce(buf, op=ReduceOp.AVG, algorithm=algorithm, channels=1, async_op=True)], [buf]
        )
        work.join_at_backward_end()  # a GPU's stream joins at the end of backward
        return work.get_future().then(lambda f: f.value()[0])

    return hook


def ddp_step(rank: int, build: Build, width: int, depth: int, rows: int, bucket_mb: float, algorithm: str):
    """Inside ``virtual.run(..., dist=True)``: when one DDP step starts and ends on this rank (virtual
    seconds), and the bytes of each bucket in the order backward launched them."""
    from torch.nn.parallel import DistributedDataParallel

    model = DistributedDataParallel(build(width, depth), bucket_cap_mb=bucket_mb)
    sizes: list[int] = []
    model.register_comm_hook(None, _hook(algorithm, sizes))
    g = torch.Generator().manual_seed(rank)
    x, y = torch.randn(rows, width, generator=g), torch.randn(rows, 1, generator=g)

    def step() -> None:
        for p in model.parameters():
            p.grad = None
        nn.functional.mse_loss(model(x), y).backward()

    step()
    step()  # DDP rebuilds its buckets in the order of the first backward
    dist.barrier()
    sizes.clear()
    t0 = clock()
    step()
    return t0, clock(), list(sizes)


def measure(
    build: Build,
    width: int,
    depth: int = 8,
    rows: int = 16,
    bucket_mb: float = 25.0,
    nodes: int = 1,
    world_size: int | None = None,
) -> tuple[float, list[int]]:
    """The DDP step (virtual seconds) on ``nodes`` DGX H100 nodes (or their first ``world_size``
    GPUs), ``rows`` samples per GPU, from the moment the last rank leaves the barrier before it (the
    ranks leave a barrier at different times) to the end of the slowest; and DDP's buckets, in bytes."""
    args = (build, width, depth, rows, bucket_mb, algorithm_for(nodes))
    got = run(ddp_step, "dgx_h100", nodes, args, world_size=world_size, dist=True, timeout=600)
    starts, ends, sizes = zip(*got.results)
    return max(ends) - max(starts), sizes[0]


def compare(
    build: Build,
    cases: Sequence[tuple[int, float]],
    nodes: Sequence[int] = (1, 2),
    depth: int = 8,
    rows: int = 16,
) -> list[dict]:
    """For each ``(width, bucket_mb)``: the step on one (virtual) GPU, then per node count the virtual
    step against the calculator's prediction (``method="sim"``)."""
    out = []
    for width, bucket_mb in cases:
        model = DenseModel.of(build(width, depth), f"MLP width {width}")
        one, _ = measure(build, width, depth, rows, bucket_mb, world_size=1)
        rate = model.flops_per_sample * rows / one  # FLOP/s of one virtual GPU's whole step
        for n in nodes:
            virtual, buckets = measure(build, width, depth, rows, bucket_mb, nodes=n)
            topo = topology_of("dgx_h100", n)
            lay = Layout(dp=topo.num_gpus, micro_batch=rows)
            calc = data_parallel_step(model, lay, topo, compute_rate=rate, buckets=buckets, method="sim")
            row = dict(
                width=width, params=model.params, bucket_mb=bucket_mb, gpus=lay.dp, buckets=len(buckets)
            )
            row.update(
                rate=rate, one_gpu=one, virtual=virtual, predicted=calc.step, all_reduce=calc.communication
            )
            row.update(exposed=calc.exposed, error=calc.step / virtual - 1)
            whole = data_parallel_step(model, lay, topo, compute_rate=rate, method="sim")  # step_time's rule
            row.update(one_call=whole.step, one_call_error=whole.step / virtual - 1)
            out.append(row)
    return out


def table(rows: list[dict]) -> str:
    """The comparison, one line per case (71 columns): the model's width and gradient MB, the GPUs
    and buckets, then microseconds: one GPU's step, the calculator's all-reduce, the virtual step,
    the calculator's step and its error, and the error of one all-reduce hidden behind all of backward."""
    head = f"{'width':>5} {'MB':>5} {'GPUs':>4} {'bkts':>4} {'1 GPU':>6} {'AR':>6} {'virtual':>7} "
    lines = [head + f"{'calc':>6} {'error':>6} {'1 call':>6} {'error':>6}"]
    for r in rows:
        lines.append(
            f"{r['width']:5d} {r['params'] * 4 / 1e6:5.1f} {r['gpus']:4d} {r['buckets']:4d} "
            f"{r['one_gpu'] * 1e6:6.0f} {r['all_reduce'] * 1e6:6.0f} {r['virtual'] * 1e6:7.0f} "
            f"{r['predicted'] * 1e6:6.0f} {100 * r['error']:+5.1f}% "
            f"{r['one_call'] * 1e6:6.0f} {100 * r['one_call_error']:+5.1f}%"
        )
    return "\n".join(lines)
