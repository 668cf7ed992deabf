"""Ranking the menu with the model, as NCCL's tuner does (chapter 3b, "How libraries choose").

NCCL times every (algorithm, protocol) pair as ``latency + bytes / bandwidth``
and runs the minimum (``nccl_tuning``). :func:`predict` does the same with the
alpha-beta-gamma time *counted from each algorithm's schedule*, so an
algorithm needs no formula to be ranked; :func:`cheapest` takes the minimum
(``mycollectives.auto`` calls it).

Counting builds every schedule: milliseconds at a few ranks, seconds at a
thousand (a schedule holds every transfer of every rank). Above
``COUNT_UP_TO`` ranks an algorithm that has a closed form
(:data:`~mycollectives.cost.formulas.FORMULAS`) is ranked by it instead, as
NCCL's tuner evaluates its formulas in microseconds; an algorithm without
one is still counted up to ``COUNT_WITHOUT_FORMULA_UP_TO`` ranks, and left
out of the choice above (:func:`left_out` names it; it still runs when
named), unless no candidate has a closed form. Symmetric memory
(``Machine.loads``), which the closed forms do not model, is always counted. The two rankings agree on every collective
and size up to 64 ranks (``tests/test_auto_scale.py``). :func:`crossover_size` finds where one
algorithm overtakes another by bisection on the closed forms, the book's
formulas, which are piecewise linear in the size.

Sizes are nccl-tests' ``size``: the whole vector, or all ``p`` blocks of an
all-gather or reduce-scatter (:meth:`~mycollectives.collectives.Collective.spec`).
"""

from __future__ import annotations

import functools

from ..algorithms import algorithms, canonical, entry, schedule_for, uses
from ..algorithms.registry import DEFAULT_SEGMENT_BYTES
from ..collectives import record
from .counted import Machine, counted_cost
from .formulas import closed_form, has_closed_form

# A generic fabric for ``auto`` when nothing was calibrated: 5 us per message
# and 10 GB/s (a 100 Gb/s link), reducing at 20 GB/s. Calibrate for your own.
DEFAULT_MACHINE = Machine(alpha=5e-6, beta=1e-10, gamma=5e-11)

# Up to this many ranks ``predict`` counts every schedule; above, it uses the
# closed forms where an algorithm has one (``method="auto"``).
COUNT_UP_TO = 64
# Above this many ranks, ``method="auto"`` leaves out an algorithm without a closed form: counting
# builds its schedule, every transfer of every rank (a ring reduce-scatter then a direct all-gather
# takes about 0.4 s at 256 ranks, 10 s at 1,024 and 4 minutes at 4,096, measured on a shared
# 2-core CPU).
COUNT_WITHOUT_FORMULA_UP_TO = 256
METHODS = ("auto", "counted", "formula")


def predict(
    collective: str,
    world_size: int,
    nbytes: int,
    machine: Machine = DEFAULT_MACHINE,
    itemsize: int = 4,
    local_size: int | None = None,
    candidates=None,
    heap: bool = False,
    method: str = "auto",
) -> dict[str, float]:
    """Time of each algorithm, in menu order: counted from its schedule, or
    (``method="formula"``, and ``"auto"`` above ``COUNT_UP_TO`` ranks) its
    closed form where it has one.

    An algorithm that reads the node size (``uses`` holds ``local_size``) is a
    candidate only when ``local_size`` is given; one that refuses the call's
    shape (a node size that does not divide ``world_size``) is left out; a
    load/store algorithm (``heap_only``) only for tensors in symmetric memory
    (``heap``).
    """
    if method not in METHODS:
        raise ValueError(f"predict: method={method!r}; expected one of {METHODS}")
    c = canonical(collective)
    formulas = not machine.loads and (method == "formula" or (method == "auto" and world_size > COUNT_UP_TO))
    skip = set(left_out(c, world_size, candidates)) if formulas and method == "auto" else set()
    out = {}
    for name in candidates or algorithms(c):
        if name in skip:
            continue
        if "local_size" in uses(c, name) and not local_size:
            continue
        if entry(c, name).heap_only and not heap and not candidates:
            continue
        try:
            if formulas and has_closed_form(c, name):
                out[name] = _formula_cost(c, name, world_size, nbytes, machine, itemsize, local_size)
            else:
                s = schedule_for(c, name, world_size, nbytes, itemsize, local_size=local_size)
                out[name] = counted_cost(s, machine, itemsize)
        except ValueError:
            continue
    return out


def left_out(collective: str, world_size: int, candidates=None) -> tuple[str, ...]:
    """The algorithms ``auto`` leaves out of its choice at ``world_size`` ranks: those without a closed
    form above ``COUNT_WITHOUT_FORMULA_UP_TO`` ranks, where counting would build their schedules
    (none, where no candidate has a closed form: those are then counted).

    >>> left_out("all_reduce", 256)  # up to 256 ranks every algorithm is counted
    ()
    """
    c = canonical(collective)
    names = list(candidates or algorithms(c))
    without = tuple(n for n in names if not has_closed_form(c, n))
    if world_size <= COUNT_WITHOUT_FORMULA_UP_TO or len(without) == len(names):
        return ()
    return without


def _formula_cost(c: str, name: str, p: int, nbytes: int, machine: Machine, itemsize: int, local_size):
    """The closed form of a call, with the options the algorithm's schedule would read."""
    reads = uses(c, name)
    params = {}
    if "segment" in reads:
        params["segment"] = max(1, DEFAULT_SEGMENT_BYTES // itemsize)  # as spec_for's default
    if "local_size" in reads:
        params["local_size"] = local_size
    return closed_form(c, name, p, _formula_count(c, p, nbytes, itemsize), machine, itemsize, **params)


@functools.cache
def _per_block(collective: str) -> bool:
    """Whether the closed forms of ``collective`` read one rank's block: the
    blocked collectives, and all-to-all (whose even call is ``p`` blocks a rank)."""
    rec = record(collective)
    return rec.blocked or rec.spec(2, 16).splits is not None


def _formula_count(collective: str, p: int, nbytes: int, itemsize: int) -> int:
    """The ``count`` a closed form reads for nccl-tests' ``size`` (without building a ``p x p`` split table)."""
    elems = max(int(nbytes) // itemsize, 0)
    return elems // p if _per_block(collective) else elems


def cheapest(collective: str, world_size: int, nbytes: int, machine: Machine = DEFAULT_MACHINE, **kw) -> str:
    """The algorithm :func:`predict` finds fastest (ties go to the earlier in the menu).

    >>> cheapest("all_reduce", 8, 64), cheapest("all_reduce", 4096, 64 << 20)  # closed forms above 64 ranks
    ('recursive_doubling', 'rabenseifner')
    """
    times = predict(collective, world_size, nbytes, machine, **kw)
    best = min(times.values())
    return next(name for name, t in times.items() if t <= best * (1 + 1e-9))  # ties: menu order


def formula_time(
    collective: str,
    algorithm: str,
    world_size: int,
    nbytes: int,
    machine: Machine,
    itemsize: int = 4,
    **params,
) -> float:
    """:func:`closed_form` of a call of nccl-tests' ``size`` (float32 unless ``itemsize`` says otherwise)."""
    c = canonical(collective)
    count = _formula_count(c, world_size, nbytes, itemsize)
    return closed_form(c, algorithm, world_size, count, machine, itemsize, **params)


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
