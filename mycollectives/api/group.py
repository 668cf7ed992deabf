"""``get_rank`` and ``get_world_size``, as in torch.distributed.

They also work inside a local world, so a reader's function written with
them runs unchanged on ``mc.run_local`` and under ``torchrun`` (chapter 2).
"""

from __future__ import annotations

from ..transport import resolve_group


def get_rank(group=None) -> int:
    """This process's (or local-world thread's) rank in ``group``.

    >>> mc.run_local(lambda rank: mc.get_rank(), 3)
    [0, 1, 2]
    """
    return resolve_group(group).rank


def get_world_size(group=None) -> int:
    """The number of ranks in ``group`` (the local world's size inside one)."""
    return resolve_group(group).world_size
