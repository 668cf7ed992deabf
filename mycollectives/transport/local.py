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

from .base import TransportDeadlock, TransportPeerError, TransportTimeout
from .local_rank import LocalTransport, TraceEvent, _Mail  # noqa: F401 (TraceEvent re-exported)

_current = threading.local()


def current_local() -> LocalTransport | None:
    """The transport of the local-world rank running in this thread, if any."""
    return getattr(_current, "transport", None)


class LocalWorld:
    """``world_size`` ranks in one process; ``run(fn, *args)`` calls ``fn(rank, *args)`` on each.

    ``eager_bytes`` sets when a send completes. ``None`` (the default): at
    once, the message is buffered ("eager", as small messages are in MPI and
    NCCL). A number: messages larger than that many bytes complete only when
    the receiver has taken them ("rendezvous", as large ones are), so two
    ranks that both send before they receive wait on each other forever.
    While :meth:`run` is running, the world sees every rank: when all ranks
    still running wait on one another, or one waits on a rank that has
    returned, it raises a deadlock error naming who waits on whom instead of
    waiting out the timeout (chapter 2).
    """

    def __init__(
        self,
        world_size: int,
        timeout: float | None = None,
        trace: bool = True,
        eager_bytes: int | None = None,
    ):
        if not isinstance(world_size, int) or world_size < 1:
            raise ValueError(f"world_size must be a positive int, got {world_size!r}")
        if eager_bytes is not None and (not isinstance(eager_bytes, int) or eager_bytes < 0):
            raise ValueError(f"eager_bytes must be None or an int >= 0, got {eager_bytes!r}")
        self.world_size = world_size
        self.timeout = float(timeout or os.environ.get("MYCOLLECTIVES_TIMEOUT", 60.0))
        self.eager_bytes = eager_bytes
        self.record = trace
        self.trace: list[TraceEvent] = []
        self._cond = threading.Condition()
        self._boxes: dict[tuple, collections.deque] = collections.defaultdict(collections.deque)
        self._failed: dict[int, BaseException] = {}
        self._running: set[int] | None = None  # ranks inside run(), for deadlock detection
        self._blocked: dict[int, tuple[str, int, Callable[[], bool]]] = {}
        self._sent: dict[tuple, int] = collections.defaultdict(int)  # messages posted, per (src, dst, tag)
        self._recvs: dict[tuple, int] = collections.defaultdict(int)  # receives posted, likewise
        self._deadlock: str | None = None
        self._t0 = time.perf_counter()
        self.transports = [LocalTransport(self, r) for r in range(world_size)]

    def now(self) -> float:
        return time.perf_counter() - self._t0

    def run(
        self, fn: Callable, *args, return_exceptions: bool = False, join_timeout: float | None = None
    ) -> list:
        """Run ``fn(rank, *args)`` on every rank; return the results in rank order.

        If a rank raises, the others' pending receives fail at once rather
        than waiting for their timeout, and the first exception is re-raised
        (or, with ``return_exceptions=True``, each rank's exception is
        returned in its place). With ``join_timeout``, ranks still running
        after that many seconds (an endless loop, say) raise ``TimeoutError``
        here; their threads are left behind as daemons.
        """
        results: list = [None] * self.world_size
        errors: list[BaseException | None] = [None] * self.world_size
        with self._cond:
            self._running = set(range(self.world_size))
            self._deadlock = None

        def main(rank: int) -> None:
            _current.transport = self.transports[rank]
            try:
                results[rank] = fn(rank, *args)
            except BaseException as e:  # noqa: BLE001 - reported to the caller below
                errors[rank] = e
                with self._cond:
                    self._failed.setdefault(rank, e)
            finally:
                _current.transport = None
                with self._cond:
                    self._running.discard(rank)
                    self._cond.notify_all()

        threads = [
            threading.Thread(target=main, args=(r,), name=f"rank{r}", daemon=True)
            for r in range(self.world_size)
        ]
        for t in threads:
            t.start()
        deadline = None if join_timeout is None else time.monotonic() + join_timeout
        for t in threads:
            t.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        stuck = [r for r, t in enumerate(threads) if t.is_alive()]
        with self._cond:
            self._running = None
        if stuck:
            raise TimeoutError(
                f"rank(s) {stuck} of a local world of {self.world_size} still running after "
                f"{join_timeout:g} s (an endless loop, or waiting outside this package?)"
            )
        if return_exceptions:
            return [e if e is not None else r for r, e in zip(results, errors)]
        if self._failed:
            rank, first = next(iter(self._failed.items()))
            first.add_note(f"(raised on rank {rank} of a local world of {self.world_size})")
            raise first
        return results

    # --- mailboxes ---------------------------------------------------------

    def _post(self, src: int, dst: int, tag: int, msg: _Mail) -> None:
        key = (src, dst, tag)
        with self._cond:
            msg.seq = self._sent[key]
            self._sent[key] += 1
            self._boxes[key].append(msg)
            self._cond.notify_all()

    def _posted_recv(self, src: int, dst: int, tag: int) -> None:
        """``dst`` posted a receive: the next unmatched message from ``src`` is
        matched to it, and a rendezvous send of that message completes."""
        with self._cond:
            self._recvs[(src, dst, tag)] += 1
            self._cond.notify_all()

    def _matched(self, src: int, dst: int, tag: int, msg: _Mail) -> bool:
        return self._recvs[(src, dst, tag)] > msg.seq

    def _take(self, src: int, dst: int, tag: int, timeout: float) -> _Mail:
        deadline = time.monotonic() + timeout
        with self._cond:  # look the mailbox up under the lock: _post may be creating it
            box = self._boxes[(src, dst, tag)]
            try:
                while not box:
                    if self._deadlock is not None:
                        raise TransportDeadlock(self._deadlock)
                    if src in self._failed:
                        raise TransportPeerError(f"rank {src} failed: {self._failed[src]!r}")
                    self._block(dst, "receive from", src, lambda: not box)
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise TransportTimeout(f"rank {dst}: nothing from rank {src} after {timeout:g} s")
                    self._cond.wait(min(left, 0.5))
            finally:
                self._blocked.pop(dst, None)
            return box.popleft()

    def _wait_taken(self, src: int, dst: int, tag: int, msg: _Mail, timeout: float) -> None:
        """A rendezvous send: wait until ``dst`` has posted the receive for ``msg``."""
        deadline = time.monotonic() + timeout
        with self._cond:
            try:
                while not self._matched(src, dst, tag, msg):
                    if self._deadlock is not None:
                        raise TransportDeadlock(self._deadlock)
                    if dst in self._failed:
                        raise TransportPeerError(f"rank {dst} failed: {self._failed[dst]!r}")
                    self._block(src, "send to", dst, lambda: not self._matched(src, dst, tag, msg))
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise TransportTimeout(
                            f"rank {src}: rank {dst} posted no receive for our message within {timeout:g} s"
                        )
                    self._cond.wait(min(left, 0.5))
            finally:
                self._blocked.pop(src, None)

    def _block(self, rank: int, what: str, peer: int, stuck: Callable[[], bool]) -> None:
        """Record that ``rank`` waits (to ``what`` ``peer``), and raise if no
        rank can ever move again. Called with the lock held."""
        self._blocked[rank] = (what, peer, stuck)
        if self._deadlock is not None:
            raise TransportDeadlock(self._deadlock)
        running = self._running
        if running is None:  # outside run(): the world cannot see every rank
            return
        if peer not in running and peer not in self._failed:
            raise TransportDeadlock(f"rank {rank} waits to {what} rank {peer}, which has already returned")
        if running and all(r in self._blocked and self._blocked[r][2]() for r in running):
            waits = "; ".join(
                f"rank {r} waits to {self._blocked[r][0]} rank {self._blocked[r][1]}" for r in sorted(running)
            )
            self._deadlock = f"deadlock: {waits}"
            self._cond.notify_all()
            raise TransportDeadlock(self._deadlock)


def run_local(fn: Callable, world_size: int, *args, timeout: float | None = None) -> list:
    """Run ``fn(rank, *args)`` on a fresh local world of ``world_size`` ranks.

    Inside ``fn``, collectives called with ``group=None`` use that world.
    Returns the list of results in rank order.
    """
    return LocalWorld(world_size, timeout=timeout).run(fn, *args)
