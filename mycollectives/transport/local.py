"""A local world: ``p`` ranks as threads of one process, exchanging real tensors.

Every rank has a :class:`LocalTransport`; a send copies the tensor into the
receiver's mailbox (so a round's sends see the data as it was when posted),
and a receive takes messages from one sender in the order they were sent.
Every message is recorded in ``LocalWorld.trace``: round, source,
destination, bytes and the buffer slice it carried, with times, which the
book's space-time diagrams and animations are drawn from.

>>> import torch, mycollectives as mc
>>> def fn(rank):
...     t = torch.tensor([rank + 1.0])
...     mc.all_reduce(t)
...     return t.item()
>>> mc.run_local(fn, 3)
[6.0, 6.0, 6.0]
"""

from __future__ import annotations

import collections
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from .base import Label, Message, TransportPeerError, TransportTimeout

_current = threading.local()


def current_local() -> LocalTransport | None:
    """The transport of the local-world rank running in this thread, if any."""
    return getattr(_current, "transport", None)


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


class LocalWorld:
    """``world_size`` ranks in one process; ``run(fn, *args)`` calls ``fn(rank, *args)`` on each."""

    def __init__(self, world_size: int, timeout: float | None = None, trace: bool = True):
        if not isinstance(world_size, int) or world_size < 1:
            raise ValueError(f"world_size must be a positive int, got {world_size!r}")
        self.world_size = world_size
        self.timeout = float(timeout or os.environ.get("MYCOLLECTIVES_TIMEOUT", 60.0))
        self.record = trace
        self.trace: list[TraceEvent] = []
        self._cond = threading.Condition()
        self._boxes: dict[tuple, collections.deque] = collections.defaultdict(collections.deque)
        self._failed: dict[int, BaseException] = {}
        self._t0 = time.perf_counter()
        self.transports = [LocalTransport(self, r) for r in range(world_size)]

    def now(self) -> float:
        return time.perf_counter() - self._t0

    def run(self, fn: Callable, *args, return_exceptions: bool = False) -> list:
        """Run ``fn(rank, *args)`` on every rank; return the results in rank order.

        If a rank raises, the others' pending receives fail at once rather
        than waiting for their timeout, and the first exception is re-raised
        (or, with ``return_exceptions=True``, each rank's exception is
        returned in its place).
        """
        results: list = [None] * self.world_size
        errors: list[BaseException | None] = [None] * self.world_size

        def main(rank: int) -> None:
            _current.transport = self.transports[rank]
            try:
                results[rank] = fn(rank, *args)
            except BaseException as e:  # noqa: BLE001 - reported to the caller below
                errors[rank] = e
                with self._cond:
                    self._failed.setdefault(rank, e)
                    self._cond.notify_all()
            finally:
                _current.transport = None

        threads = [
            threading.Thread(target=main, args=(r,), name=f"rank{r}", daemon=True)
            for r in range(self.world_size)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if return_exceptions:
            return [e if e is not None else r for r, e in zip(results, errors)]
        if self._failed:
            rank, first = next(iter(self._failed.items()))
            first.add_note(f"(raised on rank {rank} of a local world of {self.world_size})")
            raise first
        return results

    # --- mailboxes ---------------------------------------------------------

    def _post(self, src: int, dst: int, tag: int, tensor: torch.Tensor, events: list) -> None:
        with self._cond:
            self._boxes[(src, dst, tag)].append((tensor, events))
            self._cond.notify_all()

    def _take(self, src: int, dst: int, tag: int, timeout: float):
        deadline = time.monotonic() + timeout
        with self._cond:  # look the mailbox up under the lock: _post may be creating it
            box = self._boxes[(src, dst, tag)]
            while not box:
                if src in self._failed:
                    raise TransportPeerError(f"rank {src} failed: {self._failed[src]!r}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TransportTimeout(f"rank {dst}: nothing from rank {src} after {timeout:g} s")
                self._cond.wait(min(left, 0.5))
            return box.popleft()


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
        self.world._post(self.rank, dst, tag, tensor.detach().clone(), events)
        return _SendDone()

    def irecv(self, tensor, src, tag=0, label=None):
        handle = _LocalRecv(self, tensor, src, tag)
        self._pending[(src, tag)].append(handle)
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
            data, events = world._take(self.src, me, self.tag, timeout or world.timeout)
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


def run_local(fn: Callable, world_size: int, *args, timeout: float | None = None) -> list:
    """Run ``fn(rank, *args)`` on a fresh local world of ``world_size`` ranks.

    Inside ``fn``, collectives called with ``group=None`` use that world.
    Returns the list of results in rank order.
    """
    return LocalWorld(world_size, timeout=timeout).run(fn, *args)
