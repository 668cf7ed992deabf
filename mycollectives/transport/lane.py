"""What ``async_op=True`` returns, and the lane that keeps a transport's collectives in order.

:class:`Work` behaves like torch.distributed's ``Work``: ``wait()``,
``is_completed()``, ``is_success()``, ``exception()``, ``result()`` and
``get_future()`` (a ``torch.futures.Future`` whose value is the call's output
tensors, what a DDP communication hook returns).

Every rank must run a group's collectives in the order it called them, async
or not. A :class:`Lane` per transport (its ``new_lane()``) keeps that order: an async collective
goes to the lane's worker thread and runs there while the caller goes on; a
blocking one runs at once in the caller's thread when nothing is queued
before it (the common case, at no cost), and otherwise waits its turn. On a
local world (ranks as threads, whose deadlock detection watches one wait per
rank) an async collective runs before the call returns, and its ``Work`` is
already complete.
"""

from __future__ import annotations

import datetime
import queue
import threading
import weakref
from collections.abc import Callable, Sequence

import torch


class Work:
    """A collective in flight (``async_op=True``), like torch's ``Work``."""

    def __init__(self, outputs: Sequence[torch.Tensor] = ()):
        self._outputs = list(outputs)
        self._done = threading.Event()
        self._error: BaseException | None = None
        self._future: torch.futures.Future | None = None
        self._lock = threading.Lock()

    def finish(self, error: BaseException | None = None) -> None:
        with self._lock:
            self._error = error
            self._done.set()
            future = self._future
        if future is not None:
            settle(future, self._outputs, error)

    def wait(self, timeout: float | datetime.timedelta | None = None) -> bool:
        """Block until the collective is done; raise its error if it failed."""
        seconds = timeout.total_seconds() if isinstance(timeout, datetime.timedelta) else timeout
        if not self._done.wait(seconds):
            raise TimeoutError(f"the collective did not complete within {seconds:g} s")
        if self._error is not None:
            raise self._error
        return True

    def is_completed(self) -> bool:
        return self._done.is_set()

    def is_success(self) -> bool:
        return self._done.is_set() and self._error is None

    def exception(self) -> BaseException | None:
        """The error the collective raised, or None (also while it runs)."""
        return self._error

    def result(self) -> list[torch.Tensor]:
        """The call's output tensors (after ``wait()``)."""
        return self._outputs

    def get_future(self) -> torch.futures.Future:
        """A future that completes with ``result()`` (or the error)."""
        with self._lock:
            if self._future is None:
                self._future = torch.futures.Future()
                if self._done.is_set():
                    settle(self._future, self._outputs, self._error)
            return self._future


def settle(future: torch.futures.Future, outputs: list, error: BaseException | None) -> None:
    if error is None:
        future.set_result(outputs)
    else:
        future.set_exception(error)


class Lane:
    """One transport's collectives, in the order they were called (see the module)."""

    def __init__(self, eager: bool = False):
        self.eager = eager  # a local world: async calls run at once
        self._queue: queue.Queue = queue.Queue()
        self._pending = 0
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def run(
        self, job: Callable[[], None], async_op: bool, outputs: Sequence[torch.Tensor] = ()
    ) -> Work | None:
        """Run ``job`` in its turn: now (returning None), or in the worker (returning its Work)."""
        with self._lock:
            idle = self._pending == 0
            queued = async_op and not self.eager or not idle
            if queued:
                self._pending += 1
                self._start()
        if not queued:
            job()
            if not async_op:
                return None
            work = Work(outputs)
            work.finish()
            return work
        work = Work(outputs)
        self._queue.put((job, work))
        if async_op:
            return work
        work.wait()
        return None

    def _start(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=_serve, args=(weakref.ref(self), self._queue), daemon=True)
            self._thread.start()


def _serve(lane_ref, jobs: queue.Queue) -> None:
    """The worker: run queued jobs in order, each under ``torch.no_grad()``."""
    while True:
        job, work = jobs.get()
        error = None
        try:
            with torch.no_grad():
                job()
        except BaseException as e:  # noqa: BLE001 - handed to whoever waits on the work
            error = e
        lane = lane_ref()
        if lane is not None:
            with lane._lock:
                lane._pending -= 1
        work.finish(error)
        del job, work, lane
