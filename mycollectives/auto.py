"""``algorithm="auto"``: the algorithm the cost model finds fastest (chapter 3).

Like NCCL's tuner, which times every algorithm and protocol as
``latency + bytes / bandwidth`` and takes the minimum, ``choose`` evaluates
the closed-form alpha-beta-gamma time of every algorithm on the menu
(:func:`mycollectives.cost.predict`) and returns the cheapest. The answer
depends only on its arguments, so every rank picks the same algorithm.

``hierarchical`` needs the node size; it is considered only when
``local_size`` is given and divides the world size.

The answer is cached: ranking the menu costs tens of microseconds of Python,
which a small collective would pay on every call (the benchmarks page
compares sweeps recorded before and after the cache).
"""

from __future__ import annotations

import functools

from .cost import DEFAULT_MACHINE, Machine, cheapest


@functools.lru_cache(maxsize=4096)
def choose(
    collective: str,
    world_size: int,
    nbytes: int,
    machine: Machine | None = None,
    local_size: int | None = None,
) -> str:
    """The algorithm ``auto`` runs for ``nbytes`` per rank on ``world_size`` ranks.

    >>> choose("all_reduce", 8, 64), choose("all_reduce", 8, 64 << 20)
    ('recursive_doubling', 'rabenseifner')
    """
    return cheapest(collective, world_size, nbytes, machine or DEFAULT_MACHINE, local_size=local_size)
