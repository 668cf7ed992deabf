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

import contextlib
import threading
import time
from collections.abc import Callable, Iterator

from .base import TransportBase
from .local_mail import Mail
from .local_rank import LocalTransport, TraceEvent  # noqa: F401 (TraceEvent re-exported)
from .timeouts import env_timeout

_current = threading.local()


def current_local() -> LocalTransport | None:
    """The transport of the local-world rank running in this thread, if any."""
    return getattr(_current, "transport", None)


@contextlib.contextmanager
def bind(transport: TransportBase | None) -> Iterator[TransportBase | None]:
    """Make ``transport`` this thread's current one (what ``group=None`` means) inside the block;
    the one before comes back on leaving it (None: no current transport)."""
    if transport is not None and not isinstance(transport, TransportBase):
        raise TypeError(f"bind: expected a transport (a TransportBase), got {type(transport).__name__}")
    before = current_local()
    _current.transport = transport
    try:
        yield transport
    finally:
        _current.transport = before


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
        timeout = float(timeout or env_timeout(60.0))
        self.mail = Mail(world_size, timeout, trace, eager_bytes)
        self.transports = [LocalTransport(self.mail, r) for r in range(world_size)]

    @property
    def timeout(self) -> float:
        return self.mail.timeout

    @property
    def eager_bytes(self) -> int | None:
        return self.mail.eager_bytes

    @property
    def trace(self) -> list:
        """Every message sent so far, with its round, source, destination, bytes, pieces and times."""
        return self.mail.trace

    def now(self) -> float:
        return self.mail.now()

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
        self.mail.start(range(self.world_size))

        def main(rank: int) -> None:
            try:
                with bind(self.transports[rank]):
                    results[rank] = fn(rank, *args)
            except BaseException as e:  # noqa: BLE001 - reported to the caller below
                errors[rank] = e
            finally:
                self.mail.finish(rank, errors[rank])

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
        self.mail.stop()
        if stuck:
            raise TimeoutError(
                f"rank(s) {stuck} of a local world of {self.world_size} still running after "
                f"{join_timeout:g} s (an endless loop, or waiting outside this package?)"
            )
        if return_exceptions:
            return [e if e is not None else r for r, e in zip(results, errors)]
        if self.mail.failed:
            rank, first = next(iter(self.mail.failed.items()))
            first.add_note(f"(raised on rank {rank} of a local world of {self.world_size})")
            raise first
        return results


def run_local(fn: Callable, world_size: int, *args, timeout: float | None = None) -> list:
    """Run ``fn(rank, *args)`` on a fresh local world of ``world_size`` ranks.

    Inside ``fn``, collectives called with ``group=None`` use that world.
    Returns the list of results in rank order.
    """
    return LocalWorld(world_size, timeout=timeout).run(fn, *args)
