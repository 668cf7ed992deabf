"""Sweeps over message sizes and the sizes where one algorithm overtakes another.

``sweep`` is the simulator's ``all_reduce_perf -b 8 -e 8G -f 2``: the same
collective at doubling sizes, one :class:`SimResult` per size and algorithm.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..topology import Topology
from .engine import simulate
from .result import SimResult


def sizes(lo: int = 8, hi: int = 1 << 30, factor: int = 2) -> list[int]:
    """nccl-tests' ``-b lo -e hi -f factor`` sizes."""
    out, n = [], lo
    while n <= hi:
        out.append(n)
        n *= factor
    return out


def sweep(
    collective: str,
    algorithms: Sequence[str],
    topology: Topology,
    nbytes: Sequence[int] | None = None,
    **options,
) -> dict[str, list[SimResult]]:
    """Simulate each algorithm at each size; ``{algorithm: [result per size]}``."""
    nbytes = list(nbytes or sizes())
    return {a: [simulate(collective, a, n, topology, **options) for n in nbytes] for a in algorithms}


def crossover(results: dict[str, list[SimResult]], first: str, second: str) -> int | None:
    """Smallest size from which ``second`` is faster than ``first`` at every larger size.

    None if ``second`` never wins at the largest size swept.
    """
    a, b = results[first], results[second]
    if not a or b[-1].time_s >= a[-1].time_s:
        return None
    i = len(a) - 1
    while i > 0 and b[i - 1].time_s < a[i - 1].time_s:
        i -= 1
    return a[i].nbytes
