"""``all_reduce`` and ``reduce``: elementwise reductions across ranks (chapter 2)."""

from __future__ import annotations

import torch

from ..ops import ReduceOp, resolve_op
from ..schedule import WORK
from .core import Meta, launch, scratch


def _finish_avg(job, tensor: torch.Tensor) -> None:
    if job.meta.op is ReduceOp.AVG:
        tensor.div_(job.transport.world_size)


@torch.no_grad()
def all_reduce(
    tensor: torch.Tensor,
    op=ReduceOp.SUM,
    group=None,
    async_op: bool = False,
    *,
    algorithm: str = "auto",
    **options,
):
    """Reduce ``tensor`` across all ranks, in place; every rank gets the result.

    Algorithms: ``mc.algorithms("all_reduce")``; options ``timeout``,
    ``check``, ``segment_bytes`` (double binary tree), ``local_size``
    (hierarchical). Example on 2 ranks with ``op=mc.ReduceOp.SUM``::

        tensor([1, 2])  # Rank 0, before    tensor([4, 6])  # Rank 0, after
        tensor([3, 4])  # Rank 1, before    tensor([4, 6])  # Rank 1, after
    """

    def validate(c, t):
        c.tensor("tensor", tensor)
        return Meta(tensor.dtype, tensor.numel(), op=resolve_op(op))

    def body(job) -> None:
        job.run({WORK: tensor.view(-1)}, as_given=True)
        _finish_avg(job, tensor)

    return launch(
        "all_reduce", group, algorithm, options, validate, body, async_op, [tensor], heap_tensor=tensor
    )


@torch.no_grad()
def reduce(
    tensor: torch.Tensor,
    dst: int | None = None,
    op=ReduceOp.SUM,
    group=None,
    async_op: bool = False,
    group_dst: int | None = None,
    *,
    algorithm: str = "auto",
    **options,
):
    """Reduce ``tensor`` across all ranks into rank ``dst``'s tensor.

    The other ranks' tensors are left as they were (they work on a copy).
    Example on 2 ranks, ``dst=0``::

        tensor([1, 2])  # Rank 0, before    tensor([4, 6])  # Rank 0, after
        tensor([3, 4])  # Rank 1, before    tensor([3, 4])  # Rank 1, after
    """

    def validate(c, t):
        c.tensor("tensor", tensor)
        return Meta(
            tensor.dtype, tensor.numel(), root=c.root("dst", dst, group_dst, t.group_rank), op=resolve_op(op)
        )

    def body(job) -> None:
        root = job.transport.rank == job.meta.root
        if root:
            work = tensor.view(-1)
        else:  # non-roots work on a copy, in a buffer reused across calls
            work = scratch(tensor.numel(), tensor, job.transport)
            work.copy_(tensor.detach().view(-1))
        job.run({WORK: work})
        if root:
            _finish_avg(job, tensor)

    return launch("reduce", group, algorithm, options, validate, body, async_op, [tensor])
