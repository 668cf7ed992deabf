"""``reduce_scatter`` and ``reduce_scatter_tensor`` (chapter 2): each rank
gets its share of the elementwise reduction."""

from __future__ import annotations

import torch

from ..ops import ReduceOp, resolve_op
from ..schedule import WORK
from .core import Meta, launch, scratch


def _run(job, work: torch.Tensor, output: torch.Tensor) -> None:
    n, r = output.numel(), job.transport.rank
    job.run({WORK: work})
    out = output.view(-1)
    out.copy_(work[r * n : (r + 1) * n])
    if job.meta.op is ReduceOp.AVG:
        out.div_(job.transport.world_size)


@torch.no_grad()
def reduce_scatter_tensor(
    output: torch.Tensor,
    input: torch.Tensor,
    op=ReduceOp.SUM,
    group=None,
    async_op: bool = False,
    *,
    algorithm: str = "auto",
    **options,
):
    """Reduce ``input`` across ranks; rank ``i`` gets the ``i``-th block in ``output``.

    ``input`` has ``world_size`` times the elements of ``output`` and is not
    modified. Algorithms: ``mc.algorithms("reduce_scatter")``; options
    ``timeout``, ``check``, ``segment_bytes`` (PAT's buffer slot),
    ``local_size`` (hierarchical). Example on 2 ranks, SUM::

        input tensor([1, 2, 3, 4])  # Rank 0    output tensor([11, 22])  # Rank 0, after
        input tensor([10, 20, 30, 40])  # Rank 1    output tensor([33, 44])  # Rank 1, after
    """

    def validate(c, t):
        c.tensor("output", output)
        c.tensor("input", input, like=output)
        c.numel("input", input, c.p * output.numel(), f"world_size {c.p} x output's {output.numel()}")
        return Meta(output.dtype, output.numel(), op=resolve_op(op))

    def body(job) -> None:
        # input stays untouched: a copy (in symmetric memory when the input is)
        work = scratch(input.numel(), output, job.transport, in_heap=job.meta.symmetric)
        work.copy_(input.detach().reshape(-1))
        _run(job, work, output)

    return launch(
        "reduce_scatter_tensor",
        group,
        algorithm,
        options,
        validate,
        body,
        async_op,
        [output],
        heap_tensor=input,
    )


@torch.no_grad()
def reduce_scatter(
    output: torch.Tensor,
    input_list: list[torch.Tensor],
    op=ReduceOp.SUM,
    group=None,
    async_op: bool = False,
    *,
    algorithm: str = "auto",
    **options,
):
    """Reduce ``input_list[i]`` across ranks into ``output`` on rank ``i``.

    Example on 2 ranks, SUM::

        input_list [tensor([1, 2]), tensor([3, 4])]  # Rank 0    output tensor([11, 22])  # Rank 0, after
        input_list [tensor([10, 20]), tensor([30, 40])]  # Rank 1    output tensor([33, 44])  # Rank 1, after
    """

    def validate(c, t):
        c.tensor("output", output)
        c.tensor_list("input_list", input_list, output, output.numel())
        return Meta(output.dtype, output.numel(), op=resolve_op(op))

    def body(job) -> None:
        n = output.numel()
        work = scratch(len(input_list) * n, output, job.transport)
        for i, x in enumerate(input_list):  # no torch.cat: into the reused buffer
            work[i * n : (i + 1) * n].copy_(x.reshape(-1))
        _run(job, work, output)

    return launch("reduce_scatter", group, algorithm, options, validate, body, async_op, [output])


@torch.no_grad()
def reduce_scatter_single(
    output: torch.Tensor, input: torch.Tensor, op=ReduceOp.SUM, group=None, async_op=False, **kw
):
    """torch.distributed's newer name for :func:`reduce_scatter_tensor`."""
    return reduce_scatter_tensor(output, input, op, group, async_op, **kw)
