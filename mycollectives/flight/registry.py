"""Every flight recorder of this process, for the dumps.

A local world's recorders live as long as its transports; a process group's
are kept to the end (``destroy_process_group()`` frees the transport before
the exit dump is written).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable

_recorders: weakref.WeakSet = weakref.WeakSet()
_kept: list = []


def add(transport, make: Callable[[], object]) -> tuple[object, bool]:
    """The recorder of ``transport`` (its declared slot ``flight_recorder``, ``TransportBase``),
    made by ``make()`` on first use; and whether it is new."""
    rec = transport.flight_recorder
    if rec is not None:
        return rec, False
    rec = transport.flight_recorder = make()
    _recorders.add(rec)
    if not transport.local:
        _kept.append(rec)
    return rec, True


def recorders() -> list:
    """Every live recorder."""
    return list(_recorders)
