"""NCCL's choice of algorithm and protocol on a simulated machine (chapter 4, "Inside NCCL").

NCCL's tuner (``nccl_tuning``) predicts ``latency + bytes / bandwidth`` for
each of its algorithms (Ring, Tree, NVLS, NVLSTree, CollNetDirect,
CollNetChain, PAT) and protocols (LL, LL128, Simple), and runs the minimum.
:func:`tune` does what NCCL does, with NCCL's model and the channels its
search would find on the topology (:mod:`mycollectives.sim.nccl`), and
reports beside it the time the simulator gives every available pair. It
chooses only among NCCL's algorithms: the package's others (direct, Bruck,
recursive doubling, Rabenseifner, ...) are what MPI libraries and
symmetric-memory kernels run, and :func:`mycollectives.sim.sweep` compares
them.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..topology import Topology
from .nccl import choose, simulate_nccl


def tune(
    collective: str,
    nbytes: int,
    topology: Topology,
    algorithms: Sequence[str] | None = None,
    protocols: Sequence[str] | None = None,
    world_size: int | None = None,
) -> tuple[str, str, dict[tuple[str, str], float]]:
    """NCCL's ``(algorithm, protocol)`` and the simulated time (seconds) of every pair it may run.

    ``algorithms`` and ``protocols`` restrict the choice, as ``NCCL_ALGO`` and
    ``NCCL_PROTO`` do (names in any case: ``"ring"``, ``"LL128"``).

    >>> from mycollectives.topology import dgx_h100
    >>> tune("all_reduce", 1 << 30, dgx_h100(nvls=True))[:2]
    ('NVLS', 'Simple')
    """
    algorithm, protocol, model_times = choose(collective, nbytes, topology, world_size, algorithms, protocols)
    times = {
        pair: simulate_nccl(
            collective, pair[0], nbytes, topology, protocol=pair[1], world_size=world_size
        ).time_s
        for pair in model_times
    }
    return algorithm, protocol, times
