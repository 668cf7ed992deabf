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
them. :func:`nccl_call` is the whole decision for one call (algorithm,
protocol, channels) and the package's schedule that runs it
(:data:`SCHEDULES`), which a virtual run follows (:mod:`mycollectives.virtual.tuning`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..algorithms import canonical
from ..nccl import enqueue
from ..nccl.enqueue import Sized
from ..nccl.model import FUNCS
from ..nccl.model import choose as model_choose
from ..nccl.search import system as search_system
from ..topology import Topology
from .nccl import P2P, choose, hardware, simulate_nccl
from .pipeline import nvls_channels


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


# NCCL's algorithm -> the package's schedule that runs it (True), or the nearest one (False): NCCL's
# Tree is a double binary tree (Sanders et al.; NCCL 2.4), its Ring a ring per channel, PAT the same
# Bruck-like pattern, its all-to-all grouped send/recv to every peer at once. NVLS reduces in the
# switch what a two-shot ``direct`` all-reduce reduces on each GPU; NVLSTree and CollNet are
# two-level, as ``hierarchical`` is. Broadcast and reduce are pipelined chains.
SCHEDULES = {
    ("all_reduce", "Ring"): ("ring", True),
    ("all_reduce", "Tree"): ("double_binary_tree", True),
    ("all_reduce", "NVLS"): ("direct", False),
    ("all_reduce", "NVLSTree"): ("hierarchical", False),
    ("all_reduce", "CollNetDirect"): ("hierarchical", False),
    ("all_reduce", "CollNetChain"): ("hierarchical", False),
    ("all_gather", "Ring"): ("ring", True),
    ("all_gather", "PAT"): ("pat", True),
    ("all_gather", "NVLS"): ("direct", False),
    ("all_gather", "CollNetDirect"): ("hierarchical", False),
    ("reduce_scatter", "Ring"): ("ring", True),
    ("reduce_scatter", "PAT"): ("pat", True),
    ("reduce_scatter", "NVLS"): ("direct", False),
    ("reduce_scatter", "CollNetDirect"): ("hierarchical", False),
    ("broadcast", "Ring"): ("chain", True),
    ("reduce", "Ring"): ("binomial", False),
    ("all_to_all", "P2P"): ("linear", True),
}


@dataclass(frozen=True)
class Choice:
    """What NCCL 2.30.7 runs for one call, and the package's schedule for it."""

    collective: str
    nbytes: int  # nccl-tests' size
    algorithm: str  # NCCL's
    protocol: str
    channels: int
    schedule: str  # the package's schedule that runs
    exact: bool  # the schedule is NCCL's algorithm (False: the nearest one, priced as NCCL's)
    nccl_time_s: float  # NCCL's tuner's own prediction (latency + bytes / bandwidth)


def nccl_call(
    collective: str, nbytes: int, topology: Topology, nodes: int, local: int, *, op: str = "sum",
    dtype: str = "float32",
) -> Choice | None:  # fmt: skip
    """NCCL's choice for ``nbytes`` on ``nodes`` x ``local`` GPUs of ``topology`` (algorithm,
    protocol and channels, :mod:`mycollectives.nccl.enqueue`), or None for a collective NCCL's
    tuner does not choose for (scatter, gather, barrier).

    >>> from mycollectives.topology import cluster
    >>> c = nccl_call("all_reduce", 1 << 30, cluster("dgx_h100", nodes=1), 1, 8)
    >>> c.algorithm, c.protocol, c.channels, c.schedule, c.exact
    ('NVLS', 'Simple', 16, 'direct', False)
    """
    c = canonical(collective)
    if c not in FUNCS and c != "all_to_all":
        return None
    s = search_system(hardware(topology), nodes * local, nodes, collnet=topology.sharp)
    if c == "all_to_all":
        algorithm, protocol, t = P2P, "Simple", float("nan")
        sized = Sized(s.runtime_channels, 0)
    else:
        algorithm, protocol, table = model_choose(s, c, int(nbytes), op=op, dtype=dtype)
        t = table[algorithm, protocol] * 1e-6
        heads = min(8, local)
        sized = enqueue.sized(
            s, algorithm, protocol, int(nbytes), nvls_channels(s, hardware(topology).nic_gbs), heads
        )
    schedule, exact = SCHEDULES[c, algorithm]
    return Choice(c, int(nbytes), algorithm, protocol, sized.channels, schedule, exact, t)
