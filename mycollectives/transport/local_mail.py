"""The mailboxes of a local world: messages between threads, and who waits on whom.

A :class:`Mail` is what the ranks of one
:class:`~mycollectives.transport.local.LocalWorld` share: a queue of messages
per (source, destination, tag), the count of receives posted (a rendezvous
send completes once its receive is posted), the trace of every message, and
the ranks still running. Every wait goes through :meth:`Mail.take` or
:meth:`Mail.wait_taken`, which record what the rank waits for, so that the
mailboxes can tell, instead of waiting out a timeout:

* a rank that waits on a rank that has already returned (it will never send);
* a deadlock: every rank still running waits on another.

Both raise :class:`TransportDeadlock` with a message that names every
waiting rank, and a rank that waits on one that has returned is named as
such in it, whichever rank notices first. A rank that waits on a rank that
failed raises :class:`TransportPeerError` instead, and is never counted as
deadlocked: its own failure then reaches the ranks that wait on it.
"""

from __future__ import annotations

import collections
import itertools
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from .base import TransportDeadlock, TransportPeerError, TransportTimeout

_worlds = itertools.count()  # a world's number, never reused (an id() may be)


@dataclass
class Letter:
    tensor: torch.Tensor
    events: list
    seq: int = 0  # its place among the messages from src to dst with this tag


class Mail:
    """The shared state of a local world's ranks (see the module)."""

    def __init__(self, world_size: int, timeout: float, record: bool, eager_bytes: int | None):
        self.world_size, self.timeout, self.record, self.eager_bytes = (
            world_size,
            timeout,
            record,
            eager_bytes,
        )
        self.trace: list = []
        self.job = f"local-{os.getpid()}-{next(_worlds)}"  # what flight records name this world by
        self.running: set[int] | None = None  # ranks inside a run, for deadlock detection
        self.failed: dict[int, BaseException] = {}
        self._cond = threading.Condition()
        self._boxes: dict[tuple, collections.deque] = collections.defaultdict(collections.deque)
        self._blocked: dict[int, tuple[str, int, Callable[[], bool]]] = {}
        self._sent: dict[tuple, int] = collections.defaultdict(int)  # messages posted, per (src, dst, tag)
        self._recvs: dict[tuple, int] = collections.defaultdict(int)  # receives posted, likewise
        self._deadlock: str | None = None
        self._t0 = time.perf_counter()

    def now(self) -> float:
        return time.perf_counter() - self._t0

    # --- a run's ranks ------------------------------------------------------

    def start(self, ranks) -> None:
        with self._cond:
            self.running, self._deadlock = set(ranks), None

    def finish(self, rank: int, error: BaseException | None = None) -> None:
        """``rank`` has returned (or raised ``error``): wake everyone who may wait on it."""
        with self._cond:
            if error is not None:
                self.failed.setdefault(rank, error)
            if self.running is not None:
                self.running.discard(rank)
            self._cond.notify_all()

    def stop(self) -> None:
        with self._cond:
            self.running = None

    # --- messages -----------------------------------------------------------

    def post(self, src: int, dst: int, tag: int, letter: Letter) -> None:
        key = (src, dst, tag)
        with self._cond:
            letter.seq = self._sent[key]
            self._sent[key] += 1
            self._boxes[key].append(letter)
            self._cond.notify_all()

    def posted_recv(self, src: int, dst: int, tag: int) -> None:
        """``dst`` posted a receive: the next unmatched message from ``src`` is
        matched to it, and a rendezvous send of that message completes."""
        with self._cond:
            self._recvs[(src, dst, tag)] += 1
            self._cond.notify_all()

    def matched(self, src: int, dst: int, tag: int, letter: Letter) -> bool:
        return self._recvs[(src, dst, tag)] > letter.seq

    def take(self, src: int, dst: int, tag: int, timeout: float) -> Letter:
        """The next message from ``src`` to ``dst``, waiting for it."""
        box = None

        def empty() -> bool:
            return not box

        with self._cond:  # look the mailbox up under the lock: post may be creating it
            box = self._boxes[(src, dst, tag)]
            self._wait(dst, "receive from", src, empty, timeout, f"rank {dst}: nothing from rank {src}")
            return box.popleft()

    def wait_taken(self, src: int, dst: int, tag: int, letter: Letter, timeout: float) -> None:
        """A rendezvous send: wait until ``dst`` has posted the receive for ``letter``."""
        with self._cond:
            self._wait(
                src,
                "send to",
                dst,
                lambda: not self.matched(src, dst, tag, letter),
                timeout,
                f"rank {src}: rank {dst} posted no receive for our message",
            )

    def _wait(self, rank, what, peer, stuck, timeout, late) -> None:
        """Wait (the lock held) while ``stuck()``, watching for failures and deadlocks."""
        deadline = time.monotonic() + timeout
        try:
            while stuck():
                if self._deadlock is not None:
                    raise TransportDeadlock(self._deadlock)
                if peer in self.failed:
                    raise TransportPeerError(f"rank {peer} failed: {self.failed[peer]!r}")
                self._block(rank, what, peer, stuck)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TransportTimeout(f"{late} after {timeout:g} s")
                self._cond.wait(min(left, 0.5))
        finally:
            self._blocked.pop(rank, None)

    def _gone(self, peer: int) -> bool:
        """``peer`` has returned without failing: it will never send or receive again."""
        return self.running is not None and peer not in self.running and peer not in self.failed

    def _block(self, rank: int, what: str, peer: int, stuck: Callable[[], bool]) -> None:
        """Record that ``rank`` waits (to ``what`` ``peer``), and raise if no rank
        can ever move again. Called with the lock held."""
        self._blocked[rank] = (what, peer, stuck)
        if self.running is None:  # outside a run: the world cannot see every rank
            return
        if self._gone(peer):
            raise TransportDeadlock(f"rank {rank} waits to {what} rank {peer}, which has already returned")
        running = self.running

        def stuck_for_good(r: int) -> bool:  # a rank whose peer failed is about to raise instead
            return r in self._blocked and self._blocked[r][1] not in self.failed and self._blocked[r][2]()

        if running and all(stuck_for_good(r) for r in running):
            waits = []
            for r in sorted(running):
                w, q, _ = self._blocked[r]
                waits.append(
                    f"rank {r} waits to {w} rank {q}"
                    + (", which has already returned" if self._gone(q) else "")
                )
            self._deadlock = "deadlock: " + "; ".join(waits)
            self._cond.notify_all()
            raise TransportDeadlock(self._deadlock)
