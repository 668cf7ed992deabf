"""torch ``Work`` objects around the package's handles.

A collective of :class:`~mycollectives.torchpg.group.ThreadProcessGroup`
returns a :class:`TorchWork`: a subclass of ``torch.distributed.Work``, so
C++ callers (DDP's reducer, ``_broadcast_coalesced``) call its ``wait`` and
``get_future`` through torch's trampoline and reach the package's own
``Work`` (``mycollectives.api.work``). The future's value is the call's
output tensors, as a DDP communication hook expects.

On a virtual cluster an async collective really is in flight (on the rank's
communication stream), and only a wait in Python lets the scheduler run it.
Two waits would otherwise happen in C++, where the scheduler never hears of
them: a Python caller's ``future.wait()`` (the future here is a
:class:`JoiningFuture`, whose ``wait`` joins in Python first), and DDP's
reducer waiting for its buckets' futures at the end of backward. For the
latter, a collective still in flight when it is posted during backward
queues an autograd callback that waits for it; queued at the first bucket,
it runs before DDP's own (queued at the last), so DDP finds every bucket
done, and the rank's clock joins its stream where a GPU's would: at the end
of backward.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence

import torch
import torch.distributed as dist


class TorchWork(dist.Work):
    """The package's handles ``works`` (each with ``wait()``), seen as one torch ``Work``
    whose result is ``outputs``.

    Its futures complete when the work is waited for in this rank's thread (at
    once if it is already done), so their callbacks (a DDP hook's ``then``) run
    in the rank's thread, never in a thread that only carried the data.
    """

    def __init__(self, works: Sequence, outputs: Sequence[torch.Tensor] = ()):
        super().__init__()
        self._works = [w for w in works if w is not None]
        self._outputs = list(outputs)
        self._error: BaseException | None = None
        self._futures: list[torch.futures.Future] = []

    def wait(self, timeout: datetime.timedelta | None = None) -> bool:
        seconds = timeout.total_seconds() if isinstance(timeout, datetime.timedelta) and timeout else None
        try:
            for w in self._works:
                w.wait(seconds) if seconds else w.wait()
        except BaseException as e:
            self._error = e
            raise
        finally:
            self._settle()
        return True

    def _settle(self) -> None:
        futures, self._futures = self._futures, []
        for f in futures:
            if not f.done():
                f.set_exception(self._error) if self._error is not None else f.set_result(self._outputs)

    def is_completed(self) -> bool:
        return all(_completed(w) for w in self._works)

    def is_success(self) -> bool:
        return self.is_completed() and self.exception() is None

    def exception(self) -> BaseException | None:
        errors = [getattr(w, "exception", lambda: None)() for w in self._works]
        return self._error or next((e for e in errors if e is not None), None)

    def result(self) -> list[torch.Tensor]:
        return self._outputs

    def get_future(self) -> torch.futures.Future:
        """A future whose value is the output tensors (see the class)."""
        future = JoiningFuture(self)
        self._futures.append(future)
        if self.is_completed() or not all(hasattr(w, "get_future") for w in self._works):
            self.wait()  # done already, or a point-to-point handle: completed here
        return future

    def join_at_backward_end(self) -> None:
        """If still in flight during backward, have autograd wait for it when backward ends."""
        if not self.is_completed() and torch._C._current_graph_task_id() != -1:
            torch.autograd.Variable._execution_engine.queue_callback(self.wait)


class JoiningFuture(torch.futures.Future):
    """The future of a :class:`TorchWork`: ``wait()`` and ``value()`` wait for the work in
    Python first (a virtual cluster's scheduler sees that wait)."""

    def __init__(self, work: TorchWork):
        super().__init__()
        self._work = work

    def wait(self):
        if not self.done():
            self._work.wait()
        return super().wait()

    def value(self):
        if not self.done():
            self._work.wait()
        return super().value()


def _completed(work) -> bool:
    check = getattr(work, "is_completed", None)
    return bool(check()) if check is not None else False
