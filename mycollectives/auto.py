"""``algorithm="auto"``: the algorithm the cost model finds fastest (chapter 3).

Like NCCL's tuner, which times every algorithm and protocol as
``latency + bytes / bandwidth`` and takes the minimum, ``choose`` evaluates
the closed-form alpha-beta-gamma time of every algorithm on the menu
(:func:`mycollectives.cost.predict`) and returns the cheapest. The answer
depends only on its arguments, so every rank picks the same algorithm.

``hierarchical`` needs the node size; it is considered only when
``local_size`` is given and divides the world size.
"""

from __future__ import annotations

from .cost import DEFAULT_MACHINE, Machine, cheapest


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
