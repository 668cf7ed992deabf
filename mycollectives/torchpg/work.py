"""torch ``Work`` objects around the package's handles.

A collective of :class:`~mycollectives.torchpg.group.ThreadProcessGroup`
returns a :class:`TorchWork`: a subclass of ``torch.distributed.Work``, so
C++ callers (DDP's reducer, ``_broadcast_coalesced``) call its ``wait`` and
``get_future`` through torch's trampoline and reach the package's own
``Work`` (``mycollectives.api.work``). The future's value is the call's
output tensors, as a DDP communication hook expects.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence

import torch
import torch.distributed as dist


class TorchWork(dist.Work):
    """The package's handles ``works`` (each with ``wait()``), seen as one torch ``Work``
    whose result is ``outputs``."""

    def __init__(self, works: Sequence, outputs: Sequence[torch.Tensor] = ()):
        super().__init__()
        self._works = [w for w in works if w is not None]
        self._outputs = list(outputs)
        self._error: BaseException | None = None

    def wait(self, timeout: datetime.timedelta | None = None) -> bool:
        seconds = timeout.total_seconds() if isinstance(timeout, datetime.timedelta) and timeout else None
        try:
            for w in self._works:
                w.wait(seconds) if seconds else w.wait()
        except BaseException as e:
            self._error = e
            raise
        return True

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
        """A future whose value is the output tensors, complete when every handle is."""
        futures = [w.get_future() for w in self._works if hasattr(w, "get_future")]
        if len(futures) == len(self._works) and futures and not self.is_completed():
            outputs = self._outputs
            return torch.futures.collect_all(futures).then(lambda _: outputs)
        self.wait()  # point-to-point handles have no future: they are waited for here
        done: torch.futures.Future = torch.futures.Future()
        done.set_result(self._outputs)
        return done


def _completed(work) -> bool:
    check = getattr(work, "is_completed", None)
    return bool(check()) if check is not None else False
