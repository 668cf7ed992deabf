"""The time of each call of a step on a topology: where its group sits, and its cost (chapter 5).

A group's ranks are placed by the layout (:meth:`~.layout.Layout.members`);
with ``G`` GPUs per node, a group of ``g`` ranks has ``k`` members on each of
``N`` nodes. The cost model charges what chapters 3 and 4 derived:

==================  ==============================================================
collective          time (NVLink share ``B_nv``, network share ``B_net`` per GPU)
==================  ==============================================================
all-reduce          ``2 (k-1)/k n / B_nv + 2 (N-1)/N (n/k) / B_net``: ring inside a
                    node, ring between nodes, or the hierarchical algorithm
all-gather,         half of the all-reduce's terms
reduce-scatter
all-to-all          ``max((k-1)/g n / B_nv, (g-k)/g n / B_net)``: both at once
send/recv,          ``n / B`` on the slowest link between neighbours
ring step
==================  ==============================================================

plus, per round, the step latency of the slowest class of link it crosses
(NCCL's Simple protocol, :mod:`mycollectives.topology.protocols`) and the
protocol's base latency per call. ``B_net`` is a GPU's share of its node's
network cards (and of its PCIe link to them). :mod:`.groupsim` simulates
the same calls on the topology, every group at once, to check the model.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..collectives import record
from ..topology import NET, NVLINK, PCI, Topology
from ..topology import protocol as get_protocol
from .layout import Layout
from .traffic import Comm


@dataclass(frozen=True)
class Links:
    """A node's bandwidths per GPU and one direction, and the protocol's latencies."""

    gpus_per_node: int
    nvlink: float  # bytes/s, GPU to its switch
    network: float  # bytes/s, a GPU's share of the node's NICs
    step_latency: dict  # link class -> seconds per round
    base_latency: float  # seconds per call

    @classmethod
    def of(cls, topology: Topology, protocol: str = "simple") -> Links:
        """Read the rates of GPU 0's node from ``topology`` (which needs two nodes or more
        if any group leaves a node)."""
        proto = get_protocol(protocol)
        src, dst, cls_, bw = topology.link_src, topology.link_dst, topology.link_class, topology.link_bw
        kinds = np.asarray(topology.kinds)
        nv = bw[(src == 0) & (cls_ == NVLINK)]
        if not len(nv):
            raise ValueError(f"{topology.name}: GPU 0 has no NVLink link")
        G = topology.gpus_per_node
        node0 = set(range(G))
        nics = {int(d) for s, d, c in zip(src, dst, cls_) if s in node0 and c == PCI and kinds[d] == "nic"}
        net = 0.0
        if nics:
            nic_bw = sum(float(bw[(src == n) & (kinds[dst] == "leaf")].sum()) for n in nics)
            pcie = float(bw[(src == 0) & (cls_ == PCI)].min())
            net = min(nic_bw / G, pcie)
        return cls(
            G,
            float(nv.max()) * proto.efficiency,
            net * proto.efficiency,
            proto.step_latency,
            proto.base_latency,
        )


def placement(members: list[int], gpus_per_node: int) -> tuple[int, int]:
    """``(k, N)``: members per node and nodes spanned (the busiest node's count)."""
    nodes, counts = np.unique(np.asarray(members) // gpus_per_node, return_counts=True)
    return int(counts.max()), len(nodes)


@dataclass(frozen=True)
class Cost:
    """One call: seconds, and the bytes one GPU sends over NVLink and over the network."""

    time: float
    nvlink_bytes: float
    network_bytes: float


def ring_passes(collective: str) -> float:
    """The collective's traffic bound in ring passes (a pass moves ``(p-1)/p`` of the bytes), read
    off its record (:meth:`~mycollectives.collectives.Collective.bound`): 2 for an all-reduce, 1 for
    an all-gather or a reduce-scatter.

    >>> ring_passes("all_reduce"), ring_passes("reduce_scatter")
    (2.0, 1.0)
    """
    return record(collective).bound(2) / 0.5


def cost(comm: Comm, lay: Layout, links: Links) -> Cost:
    """The model's price of one call of ``comm`` (see the module docstring)."""
    members = lay.members(comm.axes)
    g = len(members)
    k, N = placement(members, links.gpus_per_node)
    if N > 1 and links.network <= 0:
        raise ValueError(
            f"{comm.strategy}: a group of {g} ranks spans {N} nodes, but the topology has no network "
            "(build it with mycollectives.topology.cluster(..., nodes=2) or more)"
        )
    a_nv, a_net = links.step_latency[NVLINK], links.step_latency[NET]
    n, c = comm.nbytes, comm.collective
    if c in ("all_reduce", "all_gather", "reduce_scatter"):
        f = ring_passes(c)
        nv = f * (k - 1) / k * n
        net = f * (N - 1) / N * n / k
        t = nv / links.nvlink + (net / links.network if N > 1 else 0.0)
        t += f * ((k - 1) * a_nv + (N - 1) * a_net) + links.base_latency
        return Cost(t, nv, net)
    if c == "all_to_all":
        nv, net = (k - 1) / g * n, (g - k) / g * n
        t = max(nv / links.nvlink, net / links.network if N > 1 else 0.0)
        return Cost(t + (g - 1) * (a_net if N > 1 else a_nv) + links.base_latency, nv, net)
    if c in ("send_recv", "ring_step"):
        if c == "send_recv":  # to the next stage: across nodes if the next rank is on another node
            cross = (members[1] // links.gpus_per_node) != (members[0] // links.gpus_per_node)
            share = 1.0 if cross else 0.0
        else:  # a ring: the hop leaving each node crosses the network, and sets the step's pace
            cross, share = N > 1, (N / g if N > 1 else 0.0)
        bw, lat = (links.network, a_net) if cross else (links.nvlink, a_nv)
        return Cost(n / bw + lat, n * (1 - share), n * share)
    raise ValueError(f"no cost model for collective {c!r}")
