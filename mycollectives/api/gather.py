"""``all_gather``, ``all_gather_into_tensor``, ``gather`` and ``scatter`` (chapter 2).

The schedules work on one flat buffer of ``p`` blocks; these functions move
the caller's tensors in and out of it (in place where torch's layout allows:
``all_gather_into_tensor`` gathers straight into ``output``).
"""

from __future__ import annotations

import torch

from ..executor import Blocks, writes
from ..schedule import WORK
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
    for example ``[p * n]`` or ``[p, n]``). Algorithms: ``mc.algorithms("all_gather")``;
    options ``timeout``, ``check``, ``segment_bytes`` (PAT's buffer slot),
    ``local_size`` (hierarchical). Example on 2 ranks::

        input  tensor([1, 2])  # Rank 0    output tensor([1, 2, 3, 4])  # Rank 0, after
        input  tensor([3, 4])  # Rank 1    output tensor([1, 2, 3, 4])  # Rank 1, after
    """

    def validate(c, t):
        c.tensor("input", input)
        c.tensor("output", output, like=input)
        c.numel("output", output, c.p * input.numel(), f"world_size {c.p} x input's {input.numel()}")
        return Meta(input.dtype, input.numel())

    def body(job) -> None:
        n, r = input.numel(), job.transport.rank
        work = output.view(-1)
        work[r * n : (r + 1) * n].copy_(input.view(-1))
        job.run({WORK: work})

    return launch(
        "all_gather_into_tensor",
        group,
        algorithm,
        options,
        validate,
        body,
        async_op,
        [output],
        heap_tensor=output,
    )


@torch.no_grad()
def all_gather_single(
    output_tensor: torch.Tensor, input_tensor: torch.Tensor, group=None, async_op=False, **kw
):
    """torch.distributed's newer name for :func:`all_gather_into_tensor`."""
    return all_gather_into_tensor(output_tensor, input_tensor, group, async_op, **kw)


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

    def body(job) -> None:
        n, r, p = tensor.numel(), job.transport.rank, job.transport.world_size
        work = scratch(p * n, tensor, job.transport)
        work[r * n : (r + 1) * n].copy_(tensor.view(-1))
        job.run({WORK: work})
        for i, out in enumerate(tensor_list):
            out.view(-1).copy_(work[i * n : (i + 1) * n])

    return launch("all_gather", group, algorithm, options, validate, body, async_op, list(tensor_list or []))


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

    def body(job) -> None:
        n, r, p, root = tensor.numel(), job.transport.rank, job.transport.world_size, job.meta.root
        v = (r - root) % p  # slot v holds the block for rank (root + v) % p
        if r == root:
            blocks = [scatter_list[(root + u) % p].reshape(-1) for u in range(p)]
            work = _in_place(job, blocks, n, keep=range(p))  # the root only reads them
        else:
            work = _in_place(job, _with_slot(job, tensor, v, p * n), n, keep=())
        if work is None:  # a schedule that writes where the caller's tensors are: copy
            work = scratch(p * n, tensor, job.transport)
            if r == root:
                for u in range(p):  # no torch.cat: into the reused buffer
                    work[u * n : (u + 1) * n].copy_(scatter_list[(root + u) % p].reshape(-1))
        job.run({WORK: work})
        out = work.blocks[v] if isinstance(work, Blocks) else work[v * n : (v + 1) * n]
        if out.data_ptr() != tensor.data_ptr():  # not received in place
            tensor.copy_(out.view_as(tensor))

    return launch("scatter", group, algorithm, options, validate, body, async_op, [tensor])


def _with_slot(job, tensor: torch.Tensor, v: int, numel: int) -> list[torch.Tensor] | None:
    """Blocks of the work buffer with ``tensor`` itself as block ``v`` and
    reused scratch memory for the others; None if ``tensor`` is not contiguous."""
    if not tensor.is_contiguous():
        return None
    n = tensor.numel()
    rest = scratch(numel, tensor, job.transport)
    return [tensor.view(-1) if u == v else rest[u * n : (u + 1) * n] for u in range(numel // max(n, 1))]


def _in_place(job, blocks: list[torch.Tensor] | None, n: int, keep) -> Blocks | None:
    """``blocks`` as the work buffer, if that is safe: every block a distinct
    contiguous tensor, and the schedule writes into none of the blocks in
    ``keep`` (the caller's inputs). None otherwise, and for empty blocks."""
    if blocks is None or n == 0 or not all(b.is_contiguous() for b in blocks):
        return None
    if len({b.data_ptr() for b in blocks}) != len(blocks):
        return None
    for off, count in writes(job.schedule, job.transport.rank, WORK):
        if any(off < (u + 1) * n and u * n < off + count for u in keep):
            return None
    return Blocks(blocks, n)


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

    def body(job) -> None:
        n, r, p, root = tensor.numel(), job.transport.rank, job.transport.world_size, job.meta.root
        v = (r - root) % p
        if r == root:  # gather straight into the caller's list, own block first
            outs = [gather_list[(root + u) % p] for u in range(p)]
            work = _in_place(job, [t.view(-1) if t.is_contiguous() else t for t in outs], n, keep=())
            if work is not None:
                work.blocks[0].copy_(tensor.reshape(-1))
        else:  # send straight from the caller's tensor, which the schedule only reads
            work = _in_place(job, _with_slot(job, tensor, v, p * n), n, keep=(v,))
        if work is None:
            work = scratch(p * n, tensor, job.transport)
            work[v * n : (v + 1) * n].copy_(tensor.reshape(-1))
        job.run({WORK: work})
        if r == root and not isinstance(work, Blocks):
            for u in range(p):
                gather_list[(root + u) % p].view(-1).copy_(work[u * n : (u + 1) * n])

    return launch("gather", group, algorithm, options, validate, body, async_op, list(gather_list or []))
