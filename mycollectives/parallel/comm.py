"""Collectives that autograd differentiates: the communication of every strategy (chapter 5).

Each is a ``torch.autograd.Function`` around one of the package's
collectives whose backward is the collective's *transpose*:

============================  ===========================  ==========================
function                      forward                      backward
============================  ===========================  ==========================
:func:`copy_to`               identity                     all-reduce (Megatron's f)
:func:`reduce_from`           all-reduce                   identity (Megatron's g)
:func:`gather_rows`           all-gather on dim 0          reduce-scatter on dim 0
:func:`scatter_rows`          reduce-scatter on dim 0      all-gather on dim 0
:func:`all_to_all`            all-to-all of rows           the all-to-all back
============================  ===========================  ==========================

Ring algorithms by default, so that the bytes a trace counts are the ring's
``2 (p - 1) / p n`` (all-reduce) and ``(p - 1) / p n`` (gather, scatter).

>>> def f(rank):
...     x = torch.tensor([float(rank + 1)], requires_grad=True)
...     y = reduce_from(x, None)  # forward: sum over ranks
...     (y * (rank + 1)).sum().backward()  # each rank weighs the sum differently
...     return y.item(), x.grad.item()
>>> mc.run_local(f, 2)  # backward of g is the identity: each rank keeps its own weight
[(3.0, 1.0), (3.0, 2.0)]
"""

from __future__ import annotations

import torch

from .. import api

ALGORITHM = {"all_reduce": "ring", "all_gather": "ring", "reduce_scatter": "ring", "all_to_all": "pairwise"}


def all_reduce_(x: torch.Tensor, group) -> torch.Tensor:
    api.all_reduce(x, group=group, algorithm=ALGORITHM["all_reduce"])
    return x


def all_gather_rows(x: torch.Tensor, group) -> torch.Tensor:
    """``[n, ...]`` on each of ``p`` ranks -> ``[p * n, ...]``, rank order."""
    p = api.get_world_size(group)
    out = x.new_empty(p * x.shape[0], *x.shape[1:])
    api.all_gather_into_tensor(out, x.contiguous(), group=group, algorithm=ALGORITHM["all_gather"])
    return out


def reduce_scatter_rows(x: torch.Tensor, group) -> torch.Tensor:
    """``[p * n, ...]`` -> this rank's ``[n, ...]`` block of the sum over ranks."""
    p = api.get_world_size(group)
    if x.shape[0] % p:
        raise ValueError(f"reduce_scatter_rows: {x.shape[0]} rows do not split over {p} ranks")
    out = x.new_empty(x.shape[0] // p, *x.shape[1:])
    api.reduce_scatter_tensor(out, x.contiguous(), group=group, algorithm=ALGORITHM["reduce_scatter"])
    return out


def all_to_all_rows(x: torch.Tensor, out_splits: list[int], in_splits: list[int], group) -> torch.Tensor:
    """Rows ``in_splits[i]`` of ``x`` go to rank ``i``; ``out_splits[i]`` rows come from it."""
    out = x.new_empty(sum(out_splits), *x.shape[1:])
    api.all_to_all_single(
        out, x.contiguous(), list(out_splits), list(in_splits), group=group, algorithm=ALGORITHM["all_to_all"]
    )
    return out


class _CopyTo(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return all_reduce_(grad.contiguous().clone(), ctx.group), None


class _ReduceFrom(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        return all_reduce_(x.contiguous().clone(), group)

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class _GatherRows(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return all_gather_rows(x, group)

    @staticmethod
    def backward(ctx, grad):
        return reduce_scatter_rows(grad, ctx.group), None


class _ReduceScatterRows(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return reduce_scatter_rows(x, group)

    @staticmethod
    def backward(ctx, grad):
        return all_gather_rows(grad, ctx.group), None


class _AllToAll(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, out_splits, in_splits, group):
        ctx.args = (out_splits, in_splits, group)
        return all_to_all_rows(x, out_splits, in_splits, group)

    @staticmethod
    def backward(ctx, grad):
        out_splits, in_splits, group = ctx.args
        return all_to_all_rows(grad, in_splits, out_splits, group), None, None, None


def copy_to(x: torch.Tensor, group) -> torch.Tensor:
    """Identity forward, all-reduce of the gradient backward (before a column-parallel layer)."""
    return _CopyTo.apply(x, group)


def reduce_from(x: torch.Tensor, group) -> torch.Tensor:
    """All-reduce forward, identity backward (after a row-parallel layer)."""
    return _ReduceFrom.apply(x, group)


def gather_rows(x: torch.Tensor, group) -> torch.Tensor:
    """All-gather along dim 0 forward, reduce-scatter of the gradient backward."""
    return _GatherRows.apply(x, group)


def scatter_rows(x: torch.Tensor, group) -> torch.Tensor:
    """Reduce-scatter along dim 0 forward, all-gather of the gradient backward."""
    return _ReduceScatterRows.apply(x, group)


def all_to_all(x: torch.Tensor, out_splits: list[int], in_splits: list[int], group) -> torch.Tensor:
    """Uneven all-to-all of rows; its gradient takes the way back."""
    return _AllToAll.apply(x, out_splits, in_splits, group)
