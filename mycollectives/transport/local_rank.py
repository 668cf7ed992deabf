"""One rank's end of a local world: its transport, its messages and their works.

:class:`LocalTransport` is what a rank of a
:class:`~mycollectives.transport.local.LocalWorld` sends and receives
through; the world holds the mailboxes they share. A send records a
:class:`TraceEvent` per piece it carries when the world keeps a trace.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from .base import Label, Message

if TYPE_CHECKING:
    from .local import LocalWorld


@dataclass
class TraceEvent:
    collective: str
    algorithm: str
    round: int
    src: int
    dst: int
    nbytes: int
    buffer: str
    offset: int
    count: int
    t_send: float
    t_recv: float | None = None


@dataclass
class _Mail:
    tensor: torch.Tensor
    events: list
    seq: int = 0  # its place among the messages from src to dst with this tag


class LocalTransport:
    """One rank's end of a :class:`LocalWorld`."""

    def __init__(self, world: LocalWorld, rank: int):
        self.world, self.rank, self.world_size = world, rank, world.world_size
        self.device = torch.device("cpu")
        self._pending: dict[tuple, collections.deque] = collections.defaultdict(collections.deque)

    @property
    def timeout(self) -> float:
        return self.world.timeout

    def group_rank(self, rank: int) -> int:
        return rank

    def isend(self, tensor, dst, tag=0, label=None, pieces=()):
        events = []
        if self.world.record:
            label = label or Label("send")
            pieces = pieces or (("tensor", 0, tensor.numel()),)
            for buf, off, count in pieces:
                ev = TraceEvent(
                    label.collective,
                    label.algorithm,
                    label.round,
                    self.rank,
                    dst,
                    count * tensor.element_size(),
                    buf,
                    off,
                    count,
                    self.world.now(),
                )
                events.append(ev)
            self.world.trace.extend(events)
        msg = _Mail(tensor.detach().clone(), events)
        self.world._post(self.rank, dst, tag, msg)
        eager = self.world.eager_bytes
        if eager is None or tensor.numel() * tensor.element_size() <= eager:
            return _SendDone()
        return _Rendezvous(self.world, self.rank, dst, tag, msg)

    def irecv(self, tensor, src, tag=0, label=None):
        handle = _LocalRecv(self, tensor, src, tag)
        self._pending[(src, tag)].append(handle)
        self.world._posted_recv(src, self.rank, tag)
        return handle

    def exchange(self, sends: list[Message], recvs: list[Message], label: Label):
        recv_works = [self.irecv(m.tensor, m.peer, 0, label) for m in recvs]
        send_works = [self.isend(m.tensor, m.peer, 0, label, m.pieces) for m in sends]
        return send_works, recv_works


class _SendDone:
    """Local sends are buffered: they complete when posted."""

    def wait(self, timeout=None) -> bool:
        return True

    def is_completed(self) -> bool:
        return True


class _Rendezvous:
    """A send above the eager limit: complete once the receiver has posted
    the matching receive (its data was copied when the send was posted)."""

    def __init__(self, world: LocalWorld, src: int, dst: int, tag: int, msg: _Mail):
        self.world, self.src, self.dst, self.tag, self.msg = world, src, dst, tag, msg

    def wait(self, timeout: float | None = None) -> bool:
        self.world._wait_taken(self.src, self.dst, self.tag, self.msg, timeout or self.world.timeout)
        return True

    def is_completed(self) -> bool:
        return self.world._matched(self.src, self.dst, self.tag, self.msg)


class _LocalRecv:
    def __init__(self, transport: LocalTransport, tensor, src: int, tag: int):
        self.transport, self.tensor, self.src, self.tag = transport, tensor, src, tag
        self.done = False

    def is_completed(self) -> bool:
        return self.done

    def wait(self, timeout: float | None = None) -> bool:
        # messages from one sender match receives in the order both were posted
        queue = self.transport._pending[(self.src, self.tag)]
        world, me = self.transport.world, self.transport.rank
        while not self.done:
            head = queue[0]
            msg = world._take(self.src, me, self.tag, timeout or world.timeout)
            data, events = msg.tensor, msg.events
            queue.popleft()
            if data.numel() != head.tensor.numel():
                raise ValueError(
                    f"rank {me}: message from rank {self.src} has {data.numel()} elements, "
                    f"the receive expects {head.tensor.numel()}"
                )
            with torch.no_grad():  # the receive may land in a parameter
                head.tensor.view(-1).copy_(data.view(-1))
            head.done = True
            for ev in events:
                ev.t_recv = world.now()
        return True
