"""What every transport offers: the only layer of the package that moves bytes.

A transport is one rank's end of a communicator. Besides point-to-point
``isend``/``irecv``, it has ``exchange``, which posts all of one round's
sends and receives together (NCCL needs that to avoid deadlock; other
backends simply post them one by one), with the collectives' own tag. Handles have ``wait(timeout)`` and
raise :class:`TransportTimeout` or :class:`TransportPeerError`; the executor
turns those into errors that name the collective, round and peer.

Every transport subclasses :class:`TransportBase`, which declares each
extension point with its default: a :meth:`~TransportBase.subgroup` (the one
generic :class:`SubGroup` view), a lane for async work
(:meth:`~TransportBase.new_lane`), ``local_size``, batching (``batched`` and
:meth:`~TransportBase.exchange`), the send and receive a rendezvous uses
(:meth:`~TransportBase.point_to_point`, :meth:`~TransportBase.settled`) and
what the flight recorder prints (:meth:`~TransportBase.describe`). A
transport overrides what it does differently; nothing asks whether it has it.
What travels (the collectives' tag, ``Label``, ``Message``, the
handles) is ``message.py``'s.
"""

from __future__ import annotations

import zlib
from typing import Protocol, runtime_checkable

import torch

from ..errors import CollectiveTimeout, DeadlockError, PeerError
from ..flight.ident import job_id
from .contract import Capabilities
from .lane import Lane
from .message import COLLECTIVE_TAG, Label, Message, Work


class _PeerNamed(Exception):
    """An error that may say which peer it is about (``peer``, or None)."""

    def __init__(self, *args, peer: int | None = None):
        super().__init__(*args)
        self.peer = peer


class TransportTimeout(_PeerNamed, CollectiveTimeout):
    """No matching message (or no taker for ours) within the timeout.

    The layers above turn it into a :class:`~mycollectives.errors.CollectiveTimeout`
    that names the call; it is one already, so none can reach a user as
    anything else."""


class NotInGroup(ValueError):
    """This rank is not a member of the process group it was given: as in
    torch.distributed, a call on such a group does nothing."""


class TransportDeadlock(TransportTimeout, DeadlockError):
    """Every rank still running waits on another: nothing can ever arrive.

    Only the local world can see all ranks at once and so detect this; the
    message says who waits on whom.
    """


class TransportPeerError(_PeerNamed, PeerError):
    """The peer is gone: it crashed, raised, or closed the connection (a
    :class:`~mycollectives.errors.PeerError`, as for :class:`TransportTimeout`)."""


@runtime_checkable
class Transport(Protocol):
    rank: int
    world_size: int
    timeout: float
    device: torch.device
    local: bool  # ranks are threads of one process (any device; async calls run at once)

    def isend(self, tensor: torch.Tensor, dst: int, tag: int = 0, label: Label | None = None) -> Work: ...

    def irecv(self, tensor: torch.Tensor, src: int, tag: int = 0, label: Label | None = None) -> Work: ...

    def exchange(
        self, sends: list[Message], recvs: list[Message], label: Label
    ) -> tuple[list[Work], list[Work]]: ...

    def group_rank(self, rank: int) -> int:
        """The rank within this communicator of a rank as the caller names it."""
        ...


class TransportBase:
    """One rank's end of a communicator, with the default of every extension point.

    A subclass sets ``rank``, ``world_size``, ``device`` and ``timeout`` and
    implements :meth:`isend` and :meth:`irecv`; everything else has a default
    it may override."""

    rank: int
    world_size: int
    device: torch.device
    timeout: float
    local: bool = False  # ranks are threads of one process (async calls run at once, no shared heap)
    local_size: int | None = None  # ranks per node, where the transport knows it
    batched: bool = False  # exchange() posts a round as one batch (NCCL): subgroups hand it on whole
    tag_limit: int | None = None  # every tag it carries is below this (a C int's, for torch); None: any int
    flight_recorder = None  # this end's flight recorder, set by ``flight`` on first use

    @property
    def capabilities(self) -> Capabilities:
        """What it declares (``contract.py``): by default messages, and a heap across processes."""
        return Capabilities(messages=True, heap_loads=not self.local)

    def isend(self, tensor: torch.Tensor, dst: int, tag: int = 0, label: Label | None = None) -> Work:
        raise NotImplementedError(f"{type(self).__name__} must implement isend")

    def irecv(self, tensor: torch.Tensor, src: int, tag: int = 0, label: Label | None = None) -> Work:
        raise NotImplementedError(f"{type(self).__name__} must implement irecv")

    def exchange(
        self, sends: list[Message], recvs: list[Message], label: Label
    ) -> tuple[list[Work], list[Work]]:
        """Post one round: every receive, then every send, with the collectives' tag."""
        recv_works = [self.irecv(m.tensor, m.peer, COLLECTIVE_TAG, label) for m in recvs]
        send_works = [self.isend(m.tensor, m.peer, COLLECTIVE_TAG, label) for m in sends]
        return send_works, recv_works

    def wait_any(self, works: list, timeout: float | None = None) -> int:
        """The index of a complete one of ``works`` (``contract.RunsChannelsApart``); by default the
        first, for the caller to wait on: only a transport declaring ``channels_apart`` is asked."""
        return 0

    def group_rank(self, rank: int) -> int:
        """The rank within this communicator of a rank as the caller names it (itself, by default)."""
        if not 0 <= rank < self.world_size:
            raise ValueError(f"rank {rank!r} is not a member of this group of {self.world_size}")
        return rank

    def subgroup(self, ranks, tag: int | None = None) -> TransportBase | None:
        """The ranks ``ranks`` (ranks of this group) as a transport numbered ``0 .. len - 1``, or
        None on a rank outside them. Its messages carry ``tag`` added to theirs; None derives one
        from the ranks and how many subgroups of them this rank made (every member must make the
        same subgroups in the same order, as ``torch.distributed.new_group``)."""
        members = tuple(int(r) for r in ranks)
        made = self.__dict__.setdefault("_subgroups_made", {})
        made[members] = n = made.get(members, 0) + 1
        if self.rank not in members:
            return None
        return SubGroup(self, members, subgroup_tag(members, n, self.tag_limit) if tag is None else tag)

    def new_lane(self) -> Lane:
        """The lane that runs this transport's collectives in order (``lane.py``)."""
        return Lane(eager=self.local)

    def lane(self) -> Lane:
        """This transport's lane, made by :meth:`new_lane` on first use and kept on the transport, so
        the two die together (a lane may hold its transport, as a virtual rank's stream does: a global
        map from transport to lane would keep both, and every buffer hanging off them, alive)."""
        lane = self.__dict__.get("_lane")
        if lane is None:
            lane = self.__dict__["_lane"] = self.new_lane()
        return lane

    def point_to_point(self) -> TransportBase:
        """The transport whose own send and receive a rendezvous exchanges its rows through."""
        return self

    def settled(self) -> None:
        """Return once the transport's own set-up messages are done (a rendezvous must not cross them)."""

    def join_heap(self, block, control: bool = False):
        """The rendezvous of symmetric memory, for a transport that declares ``hosts_heap``
        (``contract.HostsHeap``); others rendezvous through :meth:`point_to_point`."""
        raise NotImplementedError(f"{type(self).__name__} hosts no heap of symmetric memory")

    def describe(self) -> tuple[str, int, str, list[int]]:
        """(job, this process's rank in the job, group name, the group's ranks in the job),
        what the flight recorder prints."""
        return job_id(), self.rank, "group", list(range(self.world_size))


def subgroup_tag(members: tuple[int, ...], n: int, limit: int | None = None) -> int:
    """The tag of the ``n``-th subgroup of ``members``, the same on every member: a multiple of
    2**32 (above every other tag), or, under a ``limit`` of 2**31 (a C int), one of 2**16 from
    2**20 up (above a mesh's axes and streams, below the collectives' tag)."""
    h = zlib.crc32(f"{members}#{n}".encode())
    return (h % (1 << 20) + 1) << 32 if limit is None else (h % (1 << 11) + 16) << 16


class SubGroup(TransportBase):
    """The ranks ``members`` of a ``parent`` transport, renumbered ``0 .. len - 1``.

    ``members`` are ranks of the parent, in the order the subgroup numbers
    them. Messages go through the parent with ``tag`` added, so two
    subgroups that share ranks (or one subgroup on two streams) never take
    each other's messages; a batched parent takes a round whole (no tags).
    """

    def __init__(self, parent: TransportBase, members, tag: int = 0):
        self.parent, self.members, self.tag = parent, tuple(int(m) for m in members), int(tag)
        where = f"subgroup on rank {parent.rank}"
        if len(set(self.members)) != len(self.members):
            raise ValueError(f"{where}: members {self.members} repeat a rank")
        bad = [m for m in self.members if not 0 <= m < parent.world_size]
        if bad:
            raise ValueError(f"{where}: members {bad} are not ranks of a group of {parent.world_size}")
        if parent.rank not in self.members:
            raise ValueError(f"{where}: rank {parent.rank} is not one of the members {self.members}")
        self._index = {m: i for i, m in enumerate(self.members)}
        self.rank, self.world_size = self._index[parent.rank], len(self.members)
        self.device, self.local = parent.device, parent.local
        self.local_size, self.batched, self.tag_limit = parent.local_size, parent.batched, parent.tag_limit
        if self.tag_limit is not None and not 0 <= self.tag + 2 * COLLECTIVE_TAG <= self.tag_limit:
            raise ValueError(
                f"{where}: tag {self.tag} leaves no room below the parent's limit {self.tag_limit}"
            )

    @property
    def timeout(self) -> float:
        return self.parent.timeout

    def __repr__(self) -> str:
        return f"SubGroup(rank {self.rank} of {self.members}, tag {self.tag})"

    def group_rank(self, rank: int) -> int:
        """This subgroup's number for a rank the caller names as the parent does."""
        r = self.parent.group_rank(rank)
        if r not in self._index:
            raise ValueError(f"rank {rank} is not a member of this subgroup {self.members}")
        return self._index[r]

    def isend(self, tensor: torch.Tensor, dst: int, tag: int = 0, label: Label | None = None) -> Work:
        return self.parent.isend(tensor, self.members[dst], self.tag + tag, label)

    def irecv(self, tensor: torch.Tensor, src: int, tag: int = 0, label: Label | None = None) -> Work:
        return self.parent.irecv(tensor, self.members[src], self.tag + tag, label)

    def exchange(self, sends: list[Message], recvs: list[Message], label: Label):
        if not self.batched:
            return super().exchange(sends, recvs, label)
        out = [Message(m.tensor, self.members[m.peer], m.pieces) for m in sends]
        inn = [Message(m.tensor, self.members[m.peer], m.pieces) for m in recvs]
        return self.parent.exchange(out, inn, label)

    def settled(self) -> None:
        self.parent.settled()

    def describe(self) -> tuple[str, int, str, list[int]]:
        job, owner, name, ranks = self.parent.describe()
        return job, owner, f"{name} subgroup", [ranks[m] for m in self.members]
