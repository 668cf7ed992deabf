"""The alpha-beta-gamma cost model, driven by the schedules (chapters 2 and 3).

* :func:`counted_cost` counts a schedule's time round by round;
* :func:`closed_form` is the textbook formula of each algorithm (they agree);
* :func:`calibrate` fits the model's parameters on a live group;
* :func:`predict` and :func:`cheapest` rank the menu for a message size, the
  way NCCL's tuner does (time = latency + bytes / bandwidth, minimum wins).
"""

from __future__ import annotations

from ..algorithms import Spec, algorithms, build, canonical
from .calibrate import Calibration, calibrate, fit_alpha_beta, measure_gamma
from .counted import Machine, counted_cost, round_load, round_times
from .formulas import FORMULAS, UPPER_BOUND, closed_form

__all__ = [
    "Machine",
    "Calibration",
    "counted_cost",
    "closed_form",
    "round_load",
    "round_times",
    "calibrate",
    "fit_alpha_beta",
    "measure_gamma",
    "predict",
    "cheapest",
    "spec_for",
    "FORMULAS",
    "UPPER_BOUND",
    "DEFAULT_MACHINE",
]

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


def counted(collective: str, algorithm: str, world_size: int, nbytes: int, machine: Machine, **options):
    """:func:`counted_cost` of the schedule for ``nbytes`` per rank (float32)."""
    return counted_cost(build(spec_for(collective, world_size, nbytes, **options), algorithm), machine)
