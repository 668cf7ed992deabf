"""One rank's end of a local world: its transport and the works it returns.

:class:`LocalTransport` is what a rank of a
:class:`~mycollectives.transport.local.LocalWorld` sends and receives
through; the mailboxes the ranks share are a :class:`~.local_mail.Mail`. A
send records a :class:`TraceEvent` per piece it carries when the world keeps
a trace.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass

import torch

from .base import TransportBase
from .local_mail import Letter, Mail
from .message import COLLECTIVE_TAG, Label, Message


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


class LocalTransport(TransportBase):
    """One rank's end of a local world."""

    local = True

    def __init__(self, mail: Mail, rank: int):
        self.mail, self.rank, self.world_size = mail, rank, mail.world_size
        self.device = torch.device("cpu")
        self._pending: dict[tuple, collections.deque] = collections.defaultdict(collections.deque)

    @property
    def timeout(self) -> float:
        return self.mail.timeout

    def group_rank(self, rank: int) -> int:
        return rank

    def describe(self) -> tuple[str, int, str, list[int]]:
        return self.mail.job, self.rank, "local world", list(range(self.world_size))

    def isend(self, tensor, dst, tag=0, label=None, pieces=()):
        events = []
        if self.mail.record:
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
                    self.mail.now(),
                )
                events.append(ev)
            self.mail.trace.extend(events)
        letter = Letter(tensor.detach().clone(), events)
        self.mail.post(self.rank, dst, tag, letter)
        eager = self.mail.eager_bytes
        if eager is None or tensor.numel() * tensor.element_size() <= eager:
            return _SendDone()
        return _Rendezvous(self.mail, self.rank, dst, tag, letter)

    def irecv(self, tensor, src, tag=0, label=None):
        handle = _LocalRecv(self, tensor, src, tag)
        self._pending[(src, tag)].append(handle)
        self.mail.posted_recv(src, self.rank, tag)
        return handle

    def exchange(self, sends: list[Message], recvs: list[Message], label: Label):
        recv_works = [self.irecv(m.tensor, m.peer, COLLECTIVE_TAG, label) for m in recvs]
        send_works = [self.isend(m.tensor, m.peer, COLLECTIVE_TAG, label, m.pieces) for m in sends]
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

    def __init__(self, mail: Mail, src: int, dst: int, tag: int, letter: Letter):
        self.mail, self.src, self.dst, self.tag, self.letter = mail, src, dst, tag, letter

    def wait(self, timeout: float | None = None) -> bool:
        self.mail.wait_taken(self.src, self.dst, self.tag, self.letter, timeout or self.mail.timeout)
        return True

    def is_completed(self) -> bool:
        return self.mail.matched(self.src, self.dst, self.tag, self.letter)


class _LocalRecv:
    def __init__(self, transport: LocalTransport, tensor, src: int, tag: int):
        self.transport, self.tensor, self.src, self.tag = transport, tensor, src, tag
        self.done = False

    def is_completed(self) -> bool:
        return self.done

    def wait(self, timeout: float | None = None) -> bool:
        # messages from one sender match receives in the order both were posted
        queue = self.transport._pending[(self.src, self.tag)]
        mail, me = self.transport.mail, self.transport.rank
        while not self.done:
            head = queue[0]
            letter = mail.take(self.src, me, self.tag, timeout or mail.timeout)
            data, events = letter.tensor, letter.events
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
                ev.t_recv = mail.now()
        return True
