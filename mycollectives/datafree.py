"""Data-free runs: meta tensors stand in for data (SMPI's shared malloc, taken one step further).

nccl-tests' sizes reach 8 GiB per rank, and a virtual cluster thousands of
ranks: real buffers would need terabytes. SimGrid's SMPI folds every rank's
large buffers onto one shared block (``SMPI_SHARED_MALLOC``): the program runs,
its messages are priced, their contents are garbage. Here a rank of a
data-free run (``virtual.run(..., data=False)``) passes *meta* tensors
(``torch.empty(n, device="meta")``): they have a shape and a dtype and no
storage, so the package's own code (argument checks, schedules, executor,
transport) runs unchanged and prices the same messages, while every copy and
reduction is a no-op. The argument checks accept meta tensors only where
:func:`active` says so.
"""

from __future__ import annotations

from collections.abc import Callable

_probes: list[Callable[[], bool]] = []


def active() -> bool:
    """Whether this thread runs a data-free run, where meta tensors stand for data."""
    return any(probe() for probe in _probes)


def add_probe(probe: Callable[[], bool]) -> None:
    """Let ``probe()`` say which threads are data-free (how :mod:`mycollectives.virtual` marks its ranks)."""
    if probe not in _probes:
        _probes.append(probe)
