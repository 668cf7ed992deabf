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
_by_id: dict[int, object] = {}  # transports that take no attributes (rare), by id


def add(transport, make: Callable[[], object]) -> tuple[object, bool]:
    """The recorder of ``transport``, made by ``make()`` on first use; and whether it is new."""
    rec = _by_id.get(id(transport))
    if rec is not None:
        return rec, False
    rec = make()
    _recorders.add(rec)
    if not getattr(transport, "local", False):
        _kept.append(rec)
    try:
        transport._flight = rec
    except AttributeError:
        _by_id[id(transport)] = rec
    return rec, True


def recorders() -> list:
    """Every live recorder."""
    return list(_recorders) + [r for r in _by_id.values() if r not in _recorders]
