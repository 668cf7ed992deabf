"""The package's clock: wall time, or a virtual run's clock inside one.

Every timer of the package (ping-pong calibration, the local-world sweeps of
chapters 2 and 3b, the lab scripts) reads :func:`now`. Outside a virtual run
it is ``time.perf_counter()``; in a rank of a
:func:`mycollectives.virtual.run` it is that rank's virtual clock, so the
same measuring code reports what the modelled cluster would take, as
SimGrid's SMPI answers an MPI program's ``MPI_Wtime`` in simulated time.

>>> import time
>>> abs(now() - time.perf_counter()) < 1.0
True
"""

from __future__ import annotations

import time
from collections.abc import Callable

_clocks: list[Callable[[], float | None]] = []


def now() -> float:
    """Seconds from an arbitrary origin: a virtual rank's clock, else wall time."""
    for clock in _clocks:
        t = clock()
        if t is not None:
            return t
    return time.perf_counter()


def add_clock(clock: Callable[[], float | None]) -> None:
    """Let ``clock()`` answer :func:`now` in the threads where it returns a time
    (None elsewhere): how :mod:`mycollectives.virtual` puts its ranks on virtual time."""
    if clock not in _clocks:
        _clocks.append(clock)
