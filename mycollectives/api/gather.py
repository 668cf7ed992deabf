"""``all_gather``, ``all_gather_into_tensor``, ``gather`` and ``scatter`` (chapter 2).

The schedules work on one flat buffer of ``p`` blocks; these functions move
the caller's tensors in and out of it (in place where torch's layout allows:
``all_gather_into_tensor`` gathers straight into ``output``).
"""

from __future__ import annotations

import torch

from ..schedule import WORK
from ..transport import Done
from .core import Meta, launch, scratch


@torch.no_grad()
def all_gather_into_tensor(
    output: torch.Tensor,
    input: torch.Tensor,
    group=None,
    async_op: bool = False,
    *,
    algorithm: str = "auto",
    **options,
):
    """Gather every rank's ``input`` into ``output``, concatenated in rank order.

    ``output`` has ``world_size`` times the elements of ``input`` (any shape,
    for example ``[p * n]`` or ``[p, n]``). Example on 2 ranks::

        input  tensor([1, 2])  # Rank 0    output tensor([1, 2, 3, 4])  # Rank 0, after
        input  tensor([3, 4])  # Rank 1    output tensor([1, 2, 3, 4])  # Rank 1, after
    """

    def validate(c, t):
        c.tensor("input", input)
        c.tensor("output", output, like=input)
        c.numel("output", output, c.p * input.numel(), f"world_size {c.p} x input's {input.numel()}")
        return Meta(input.dtype, input.numel())

    job = launch("all_gather_into_tensor", group, algorithm, options, validate)
    n, r = input.numel(), job.transport.rank
    work = output.view(-1)
    work[r * n : (r + 1) * n].copy_(input.view(-1))
    job.run({WORK: work})
    return Done() if async_op else None


@torch.no_grad()
def all_gather(
    tensor_list: list[torch.Tensor],
    tensor: torch.Tensor,
    group=None,
    async_op: bool = False,
    *,
    algorithm: str = "auto",
    **options,
):
    """Gather every rank's ``tensor`` into ``tensor_list[rank]`` on every rank.

    Example on 2 ranks::

        tensor tensor([1, 2])  # Rank 0    tensor_list [tensor([1, 2]), tensor([3, 4])]  # every rank, after
        tensor tensor([3, 4])  # Rank 1
    """

    def validate(c, t):
        c.tensor("tensor", tensor)
        c.tensor_list("tensor_list", tensor_list, tensor, tensor.numel())
        return Meta(tensor.dtype, tensor.numel())

    job = launch("all_gather", group, algorithm, options, validate)
    n, r, p = tensor.numel(), job.transport.rank, job.transport.world_size
    work = scratch(p * n, tensor, job.transport)
    work[r * n : (r + 1) * n].copy_(tensor.view(-1))
    job.run({WORK: work})
    for i, out in enumerate(tensor_list):
        out.view(-1).copy_(work[i * n : (i + 1) * n])
    return Done() if async_op else None


@torch.no_grad()
def scatter(
    tensor: torch.Tensor,
    scatter_list: list[torch.Tensor] | None = None,
    src: int | None = None,
    group=None,
    async_op: bool = False,
    group_src: int | None = None,
    *,
    algorithm: str = "auto",
    **options,
):
    """Rank ``src`` sends ``scatter_list[i]`` to rank ``i``, which receives it into ``tensor``.

    ``scatter_list`` is read on ``src`` only. Example on 2 ranks, ``src=0``::

        scatter_list [tensor([1, 2]), tensor([3, 4])]  # Rank 0
        tensor tensor([1, 2])  # Rank 0, after    tensor tensor([3, 4])  # Rank 1, after
    """

    def validate(c, t):
        c.tensor("tensor", tensor)
        root = c.root("src", src, group_src, t.group_rank, default=0)
        if c.rank == root:
            c.tensor_list("scatter_list", scatter_list, tensor, tensor.numel())
        return Meta(tensor.dtype, tensor.numel(), root=root)

    job = launch("scatter", group, algorithm, options, validate)
    n, r, p, root = tensor.numel(), job.transport.rank, job.transport.world_size, job.meta.root
    if r == root:  # slot v holds the block for rank (root + v) % p
        work = scratch(p * n, tensor, job.transport)
        for v in range(p):  # no torch.cat: into the reused buffer
            work[v * n : (v + 1) * n].copy_(scatter_list[(root + v) % p].reshape(-1))
    else:
        work = scratch(p * n, tensor, job.transport)
    job.run({WORK: work})
    v = (r - root) % p
    tensor.view(-1).copy_(work[v * n : (v + 1) * n])
    return Done() if async_op else None


@torch.no_grad()
def gather(
    tensor: torch.Tensor,
    gather_list: list[torch.Tensor] | None = None,
    dst: int | None = None,
    group=None,
    async_op: bool = False,
    group_dst: int | None = None,
    *,
    algorithm: str = "auto",
    **options,
):
    """Rank ``dst`` receives every rank's ``tensor`` into ``gather_list[rank]``.

    ``gather_list`` is used on ``dst`` only. Example on 2 ranks, ``dst=0``::

        tensor tensor([1, 2])  # Rank 0    gather_list [tensor([1, 2]), tensor([3, 4])]  # Rank 0, after
        tensor tensor([3, 4])  # Rank 1
    """

    def validate(c, t):
        c.tensor("tensor", tensor)
        root = c.root("dst", dst, group_dst, t.group_rank, default=0)
        if c.rank == root:
            c.tensor_list("gather_list", gather_list, tensor, tensor.numel())
        return Meta(tensor.dtype, tensor.numel(), root=root)

    job = launch("gather", group, algorithm, options, validate)
    n, r, p, root = tensor.numel(), job.transport.rank, job.transport.world_size, job.meta.root
    work = scratch(p * n, tensor, job.transport)
    v = (r - root) % p
    work[v * n : (v + 1) * n].copy_(tensor.view(-1))
    job.run({WORK: work})
    if r == root:
        for v in range(p):
            gather_list[(root + v) % p].view(-1).copy_(work[v * n : (v + 1) * n])
    return Done() if async_op else None
