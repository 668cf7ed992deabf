"""A process group's transport: some ranks of a thread world, with a tag space of their own.

``dist.new_group(ranks)`` inside a thread world becomes a :class:`GroupView`
over the world's transport (a local world's, or a virtual run's): its ranks
are ``members`` renumbered ``0 .. len - 1``, and every message it carries is
tagged with the group's base added, so two groups that share ranks never
take each other's messages, as two communicators never do.
"""

from __future__ import annotations

import zlib

import torch

from ..transport import COLLECTIVE_TAG, Label, Message


def tag_base(group_name: str) -> int:
    """The tags of group ``group_name`` start here; every rank derives the same base from the
    name torch gives the group (the same on every member)."""
    return (zlib.crc32(group_name.encode()) % (1 << 20) + 1) << 32


class GroupView:
    """The ranks ``members`` (ranks of ``parent``) as a transport of their own."""

    def __init__(self, parent, members, base: int):
        self.parent, self.members, self.base = parent, tuple(int(m) for m in members), int(base)
        if parent.rank not in self.members:
            raise ValueError(f"rank {parent.rank} is not one of the group's members {self.members}")
        self._index = {m: i for i, m in enumerate(self.members)}
        self.rank, self.world_size = self._index[parent.rank], len(self.members)
        self.device: torch.device = parent.device
        self.local: bool = parent.local

    @property
    def timeout(self) -> float:
        return self.parent.timeout

    def __repr__(self) -> str:
        return f"GroupView(rank {self.rank} of {self.members})"

    def group_rank(self, rank: int) -> int:
        """This group's number for a rank named as the whole world names it."""
        if rank not in self._index:
            raise ValueError(f"rank {rank} is not a member of the process group {self.members}")
        return self._index[rank]

    def isend(self, tensor: torch.Tensor, dst: int, tag: int = 0, label: Label | None = None):
        return self.parent.isend(tensor, self.members[dst], self.base + tag, label)

    def irecv(self, tensor: torch.Tensor, src: int, tag: int = 0, label: Label | None = None):
        return self.parent.irecv(tensor, self.members[src], self.base + tag, label)

    def exchange(self, sends: list[Message], recvs: list[Message], label: Label):
        recv_works = [self.irecv(m.tensor, m.peer, COLLECTIVE_TAG, label) for m in recvs]
        send_works = [self.isend(m.tensor, m.peer, COLLECTIVE_TAG, label) for m in sends]
        return send_works, recv_works
