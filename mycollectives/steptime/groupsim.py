"""Simulating one kind of call of a layout: every group of an axis at once (chapter 5).

``mycollectives.sim.simulate`` runs one collective on GPUs ``0 .. p-1``. A
layout runs the same collective in *every* group of an axis at the same
time (eight data-parallel all-reduces, one per tensor-parallel rank, say),
on ranks that are not consecutive, and those groups share links. This
module builds the schedule of one group once, maps each group's ranks to
its GPUs, and plays all of them round by round on the topology with the
simulator's own pieces: routes from :meth:`~mycollectives.topology.graph.Topology.route`,
links shared max-min fairly (``mycollectives.sim.drain``), a round's
step latency from the protocol. With a single group of consecutive ranks it
gives the simulator's answer (a test holds it to that).
"""

from __future__ import annotations

import numpy as np

from ..algorithms import schedule_for
from ..sim import Paths, drain
from ..topology import Topology
from ..topology import protocol as get_protocol
from .layout import Layout
from .traffic import Comm


def groups_of(lay: Layout, axes: tuple[str, ...]) -> list[list[int]]:
    """Every group of ``lay`` along ``axes``, each a list of ranks (= GPUs)."""
    seen, out = set(), []
    for r in range(lay.world):
        members = tuple(lay.members(axes, r))
        if members not in seen:
            seen.add(members)
            out.append(list(members))
    return out


def _rounds(collective: str, algorithm: str, nbytes: float, g: int, local: int, itemsize: int):
    """Per round, the (src, dst, bytes) of one group's messages, in group ranks."""
    if collective in ("send_recv", "ring_step"):
        src = np.arange(g if collective == "ring_step" else g - 1)
        return [(src, (src + 1) % g, np.full(len(src), int(nbytes)))]
    sched = schedule_for(collective, algorithm, g, int(nbytes), itemsize, local_size=local)
    out = []
    for r in sched.rounds:
        remote = r.src != r.dst
        key = r.src[remote] * g + r.dst[remote]
        key, inv = np.unique(key, return_inverse=True)
        nb = np.bincount(inv, weights=r.count[remote] * itemsize).astype(np.int64)
        out.append((key // g, key % g, nb))
    return out


def simulate_groups(
    collective: str,
    nbytes: float,
    topology: Topology,
    groups: list[list[int]],
    algorithm: str | None = None,
    protocol: str = "simple",
    itemsize: int = 2,
) -> float:
    """Seconds for every group in ``groups`` to run one call of ``collective`` at once.

    ``algorithm`` defaults to the ring, or ``hierarchical`` for an all-reduce
    whose groups have several members on each of several nodes.
    """
    gpus = np.asarray(groups, dtype=np.int64)  # [groups, g]
    if gpus.max() >= topology.num_gpus:
        raise ValueError(f"the groups need GPU {gpus.max()}; {topology.name} has {topology.num_gpus}")
    g = gpus.shape[1]
    nodes = gpus[0] // topology.gpus_per_node
    local = int(np.unique(nodes, return_counts=True)[1].max())
    if algorithm is None:
        algorithm = "hierarchical" if collective == "all_reduce" and 1 < local < g else "ring"
        algorithm = "pairwise" if collective == "all_to_all" else algorithm
    proto = get_protocol(protocol)
    total, seen = proto.base_latency, {}
    for src, dst, nb in _rounds(collective, algorithm, nbytes, g, local, itemsize):
        if not len(src):
            continue
        s, d = gpus[:, src].ravel(), gpus[:, dst].ravel()
        key = s.tobytes() + d.tobytes() + nb.tobytes()
        if key not in seen:
            flow, link = topology.route(s, d)
            paths = Paths.of(flow, link, len(s))
            cls = np.zeros(len(s), np.int64)
            np.maximum.at(cls, flow, topology.link_class[link])
            lat = np.bincount(flow, weights=topology.link_lat[link], minlength=len(s))
            step = max(proto.round_latency(int(c)) for c in np.unique(cls)) + lat.max()
            t, _ = drain(paths, topology.link_bw[paths.links] * proto.efficiency, np.tile(nb, len(gpus)))
            seen[key] = step + t
        total += seen[key]
    return float(total)


def simulate_comm(comm: Comm, lay: Layout, topology: Topology, protocol: str = "simple") -> float:
    """One call of ``comm`` in every group of its axes at once, on ``topology``."""
    return simulate_groups(
        comm.collective, comm.nbytes, topology, groups_of(lay, comm.axes), protocol=protocol
    )
