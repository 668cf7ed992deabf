"""An NCCL-like tuner on a topology: every (algorithm, protocol) simulated, the fastest wins.

NCCL's tuner (``nccl_tuning``) predicts ``latency + bytes / bandwidth`` for
each algorithm and protocol and picks the minimum; here the prediction is a
simulation, so contention and the topology's routes count too (chapter 4,
"Inside NCCL").
"""

from __future__ import annotations

from collections.abc import Sequence

from ..algorithms import algorithms as menu
from ..algorithms import canonical
from ..topology import PROTOCOLS, Topology
from .engine import simulate


def tune(
    collective: str,
    nbytes: int,
    topology: Topology,
    algorithms: Sequence[str] | None = None,
    protocols: Sequence[str] = tuple(PROTOCOLS),
    **options,
) -> tuple[str, str, dict[tuple[str, str], float]]:
    """Fastest ``(algorithm, protocol)`` and the simulated time of every pair (seconds).

    ``nvls`` joins the candidates for all-reduce on a topology with in-switch
    reduction (Simple protocol only, as in NCCL).
    """
    c = canonical(collective)
    names = list(algorithms or menu(c))
    if algorithms is None and c == "all_reduce" and topology.in_switch_reduction:
        names.append("nvls")
    times = {}
    for a in names:
        for p in protocols if a != "nvls" else ("simple",):
            try:
                times[a, p] = simulate(c, a, nbytes, topology, protocol=p, **options).time_s
            except ValueError:  # e.g. hierarchical on a world its node size does not divide
                continue
    best = min(times, key=times.__getitem__)
    return best[0], best[1], times
