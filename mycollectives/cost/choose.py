"""Ranking the menu with the model, as NCCL's tuner does (chapter 3, "How libraries choose").

NCCL times every (algorithm, protocol) pair as ``latency + bytes / bandwidth``
and runs the minimum (``nccl_tuning``). :func:`predict` does the same with
the closed-form alpha-beta-gamma times of our menu; :func:`cheapest` takes
the minimum and :func:`crossover_size` finds where one algorithm overtakes
another. ``mycollectives.auto`` calls :func:`cheapest`.
"""

from __future__ import annotations

from ..algorithms import Spec, algorithms, build, canonical
from .counted import Machine, counted_cost
from .formulas import closed_form

# A generic fabric for ``auto`` when nothing was calibrated: 5 us per message
# and 10 GB/s (a 100 Gb/s link), reducing at 20 GB/s. Calibrate for your own.
DEFAULT_MACHINE = Machine(alpha=5e-6, beta=1e-10, gamma=5e-11)


def spec_for(collective: str, world_size: int, nbytes: int, itemsize: int = 4, **options) -> Spec:
    """The :class:`Spec` of a collective on ``nbytes`` per rank (uniform all-to-all)."""
    c, p = canonical(collective), world_size
    elems = max(nbytes // itemsize, 0)
    if c in ("all_gather", "reduce_scatter", "scatter", "gather"):
        return Spec(c, p, count=elems, **options)  # nbytes: one rank's block
    if c == "all_to_all":
        m = elems // p
        return Spec(c, p, splits=tuple((m,) * p for _ in range(p)), **options)
    if c == "barrier":
        return Spec(c, p, count=1, **options)
    return Spec(c, p, count=elems, **options)


def predict(
    collective: str,
    world_size: int,
    nbytes: int,
    machine: Machine = DEFAULT_MACHINE,
    itemsize: int = 4,
    local_size: int | None = None,
    candidates=None,
) -> dict[str, float]:
    """Modelled time of each algorithm (closed form), in menu order.

    ``hierarchical`` is a candidate only when ``local_size`` is given and
    divides ``world_size`` (it needs to know the node size).
    """
    c = canonical(collective)
    spec = spec_for(c, world_size, nbytes, itemsize)
    count = spec.count if c != "all_to_all" else max(nbytes // itemsize, 0) // world_size
    out = {}
    for name in candidates or algorithms(c):
        if name == "hierarchical" and not (local_size and world_size % local_size == 0):
            continue
        out[name] = closed_form(c, name, world_size, count, machine, itemsize, local_size=local_size)
    return out


def cheapest(collective: str, world_size: int, nbytes: int, machine: Machine = DEFAULT_MACHINE, **kw) -> str:
    """The algorithm :func:`predict` finds fastest (ties go to the earlier in the menu)."""
    times = predict(collective, world_size, nbytes, machine, **kw)
    best = min(times.values())
    return next(name for name, t in times.items() if t <= best * (1 + 1e-9))  # ties: menu order


def counted_time(collective: str, algorithm: str, world_size: int, nbytes: int, machine: Machine, **options):
    """:func:`counted_cost` of the schedule for ``nbytes`` per rank (float32)."""
    return counted_cost(build(spec_for(collective, world_size, nbytes, **options), algorithm), machine)


def crossover_size(
    collective: str,
    first: str,
    second: str,
    world_size: int,
    machine: Machine = DEFAULT_MACHINE,
    hi: int = 1 << 40,
) -> int | None:
    """Smallest size in bytes (a multiple of 4) from which ``second`` is no slower than ``first``.

    Bisection on the closed forms, which are piecewise linear in the size;
    None if ``second`` is still slower at ``hi``.
    """

    def wins(n: int) -> bool:
        t = predict(collective, world_size, n, machine, candidates=(first, second))
        return t[second] <= t[first]

    if not wins(hi):
        return None
    lo = 4
    if wins(lo):
        return lo
    while hi - lo > 4:
        mid = (lo + hi) // 8 * 4
        lo, hi = (lo, mid) if wins(mid) else (mid, hi)
    return hi
