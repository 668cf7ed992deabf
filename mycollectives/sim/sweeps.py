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


NCCL_ALGORITHMS = ("Ring", "Tree", "NVLS", "NVLSTree", "CollNetChain", "CollNetDirect")


def nccl_table(
    collective: str,
    nbytes: int,
    node_counts: Sequence[int],
    node: str = "dgx_h100",
    algorithms: Sequence[str] = NCCL_ALGORITHMS,
) -> str:
    """busbw (GB/s) of each of NCCL's algorithms on clusters of ``node_counts`` nodes, and NCCL's pick.

    The fabric's switches reduce (SHARP) where there is more than one node,
    so that CollNet has a column; NCCL's pick is for the cluster without
    them. ``-``: the algorithm does not run there (chapter 4, "NCCL's algorithms").
    """
    from ..topology import cluster
    from .nccl import choose, simulate_nccl

    short = {"CollNetChain": "CNChain", "CollNetDirect": "CNDirect"}
    lines = [f"{'nodes':>5s}" + "".join(f"{short.get(a, a):>9s}" for a in algorithms) + "  NCCL's pick"]
    for n in node_counts:
        topo = cluster(node, n, sharp=n > 1)
        row = []
        for a in algorithms:
            try:
                row.append(f"{simulate_nccl(collective, a, nbytes, topo).busbw:9.0f}")
            except ValueError:  # not run on this many nodes
                row.append(f"{'-':>9s}")
        pick = choose(collective, nbytes, cluster(node, n))[:2]
        lines.append(f"{n:5d}" + "".join(row) + f"  {pick[0]}/{pick[1]}")
    return "\n".join(lines)
