"""A process group's tag space: ``dist.new_group(ranks)`` inside a thread world.

A new group is the thread world's transport's own ``subgroup(members, tag)``
(the one generic :class:`~mycollectives.transport.SubGroup`, or a virtual
run's, priced on its GPUs): its ranks are ``members`` renumbered
``0 .. len - 1``, and every message it carries is tagged with the group's
base added, so two groups that share ranks never take each other's
messages, as two communicators never do.
"""

from __future__ import annotations

import zlib


def tag_base(group_name: str) -> int:
    """The tags of group ``group_name`` start here; every rank derives the same base from the
    name torch gives the group (the same on every member)."""
    return (zlib.crc32(group_name.encode()) % (1 << 20) + 1) << 32
