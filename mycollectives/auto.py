"""``algorithm="auto"``: the algorithm the cost model finds fastest (chapter 3).

Like NCCL's tuner, which times every algorithm and protocol as
``latency + bytes / bandwidth`` and takes the minimum, :func:`choose` counts
the alpha-beta-gamma time of every algorithm on the menu from its schedule
(:func:`mycollectives.cost.predict`) and returns the cheapest: a newly
registered algorithm is a candidate at once, formula or not. The answer
depends only on its arguments, so every rank picks the same algorithm.

An algorithm that needs the node size (``hierarchical``) is considered only
when ``local_size`` is given and divides the world size.

The answer is cached per call shape: ranking the menu builds a schedule per
algorithm, which a small collective would otherwise pay on every call.
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
    itemsize: int = 4,
) -> str:
    """The algorithm ``auto`` runs for a call of nccl-tests' ``size`` ``nbytes``.

    >>> choose("all_reduce", 8, 64), choose("all_reduce", 8, 64 << 20)
    ('recursive_doubling', 'rabenseifner')
    """
    machine = machine or DEFAULT_MACHINE
    return cheapest(collective, world_size, nbytes, machine, itemsize=itemsize, local_size=local_size)
