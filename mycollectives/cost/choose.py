"""Ranking the menu with the model, as NCCL's tuner does (chapter 3b, "How libraries choose").

NCCL times every (algorithm, protocol) pair as ``latency + bytes / bandwidth``
and runs the minimum (``nccl_tuning``). :func:`predict` does the same with the
alpha-beta-gamma time *counted from each algorithm's schedule*, so an
algorithm needs no formula to be ranked; :func:`cheapest` takes the minimum
(``mycollectives.auto`` calls it). :func:`crossover_size` finds where one
algorithm overtakes another by bisection on the closed forms, the book's
formulas, which are piecewise linear in the size.

Sizes are nccl-tests' ``size``: the whole vector, or all ``p`` blocks of an
all-gather or reduce-scatter (:meth:`~mycollectives.collectives.Collective.spec`).
"""

from __future__ import annotations

from ..algorithms import algorithms, canonical, entry, schedule_for, uses
from ..collectives import record
from .counted import Machine, counted_cost
from .formulas import closed_form

# A generic fabric for ``auto`` when nothing was calibrated: 5 us per message
# and 10 GB/s (a 100 Gb/s link), reducing at 20 GB/s. Calibrate for your own.
DEFAULT_MACHINE = Machine(alpha=5e-6, beta=1e-10, gamma=5e-11)


def predict(
    collective: str,
    world_size: int,
    nbytes: int,
    machine: Machine = DEFAULT_MACHINE,
    itemsize: int = 4,
    local_size: int | None = None,
    candidates=None,
    heap: bool = False,
) -> dict[str, float]:
    """Time of each algorithm, counted from its schedule, in menu order.

    An algorithm that reads the node size (``uses`` holds ``local_size``) is a
    candidate only when ``local_size`` is given; one that refuses the call's
    shape (a node size that does not divide ``world_size``) is left out; a
    load/store algorithm (``heap_only``) only for tensors in symmetric memory
    (``heap``).
    """
    c = canonical(collective)
    out = {}
    for name in candidates or algorithms(c):
        if "local_size" in uses(c, name) and not local_size:
            continue
        if entry(c, name).heap_only and not heap and not candidates:
            continue
        try:
            s = schedule_for(c, name, world_size, nbytes, itemsize, local_size=local_size)
        except ValueError:
            continue
        out[name] = counted_cost(s, machine, itemsize)
    return out


def cheapest(collective: str, world_size: int, nbytes: int, machine: Machine = DEFAULT_MACHINE, **kw) -> str:
    """The algorithm :func:`predict` finds fastest (ties go to the earlier in the menu)."""
    times = predict(collective, world_size, nbytes, machine, **kw)
    best = min(times.values())
    return next(name for name, t in times.items() if t <= best * (1 + 1e-9))  # ties: menu order


def formula_time(collective: str, algorithm: str, world_size: int, nbytes: int, machine: Machine, **params):
    """:func:`closed_form` of a call of nccl-tests' ``size`` (float32)."""
    spec = record(collective).spec(world_size, nbytes)
    count = spec.count if spec.splits is None else spec.splits[0][0]
    return closed_form(canonical(collective), algorithm, world_size, count, machine, **params)


def crossover_size(
    collective: str,
    first: str,
    second: str,
    world_size: int,
    machine: Machine = DEFAULT_MACHINE,
    hi: int = 1 << 40,
) -> int | None:
    """Smallest size in bytes (a multiple of 4) from which ``second`` is no
    slower than ``first``, by their closed forms; None if ``second`` is still
    slower at ``hi``."""
    step = 4

    def wins(n: int) -> bool:
        return formula_time(collective, second, world_size, n, machine) <= formula_time(
            collective, first, world_size, n, machine
        )

    if not wins(hi):
        return None
    lo = step
    if wins(lo):
        return lo
    while hi - lo > step:
        mid = (lo + hi) // (2 * step) * step
        lo, hi = (lo, mid) if wins(mid) else (mid, hi)
    return hi
