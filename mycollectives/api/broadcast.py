"""``broadcast``: the root's tensor, copied to every rank (chapter 2)."""

from __future__ import annotations

import torch

from ..schedule import WORK
from .core import Meta, launch


@torch.no_grad()
def broadcast(
    tensor: torch.Tensor,
    src: int | None = None,
    group=None,
    async_op: bool = False,
    group_src: int | None = None,
    *,
    algorithm: str = "auto",
    **options,
):
    """Copy ``tensor`` from rank ``src`` to every rank, in place.

    Algorithms: ``mc.algorithms("broadcast")``; options ``timeout``, ``check``,
    ``segment_bytes`` (chain). Example on 3 ranks, ``src=1``::

        tensor([0, 0])  # Rank 0, before    tensor([7, 8])  # Rank 0, after
        tensor([7, 8])  # Rank 1, before    tensor([7, 8])  # Rank 1, after
        tensor([0, 0])  # Rank 2, before    tensor([7, 8])  # Rank 2, after
    """

    def validate(c, t):
        c.tensor("tensor", tensor)
        return Meta(tensor.dtype, tensor.numel(), root=c.root("src", src, group_src, t.group_rank))

    def body(job) -> None:
        job.run({WORK: tensor.view(-1)}, as_given=True)

    return launch(
        "broadcast", group, algorithm, options, validate, body, async_op, [tensor], heap_tensor=tensor
    )
