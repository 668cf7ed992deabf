"""Devices, links and routes (chapter 4, "Links").

A :class:`Topology` is a graph of vertices (GPUs first, numbered like ranks,
then switches, NICs, host bridges) joined by *directed* links: a cable is two
links, one per direction, each with its own bandwidth, because NVLink, PCIe
and InfiniBand are all full duplex.

Routes come from *tiers*: each tier is a forest (every vertex has at most one
parent) and a transfer between two GPUs takes the first tier in which both
hang from the same root, climbing to their lowest common ancestor and down.
A DGX has two tiers: the NVSwitch star inside each node, then the network
(GPU, NIC, leaf switch, spine). Routing is vectorised: :meth:`Topology.route`
takes arrays of sources and destinations and returns every (flow, link) pair.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

NVLINK, PCI, NET = 0, 1, 2  # link classes, as NCCL's tuner groups them (hwLat rows)
CLASS_NAMES = ("NVLink", "PCIe", "network")


@dataclass
class Tier:
    """One routing forest: ``parent[v]`` (-1 for roots and for vertices outside
    it), the link ``v -> parent`` in ``up[v]`` and ``parent -> v`` in ``down[v]``."""

    name: str
    parent: np.ndarray
    up: np.ndarray
    down: np.ndarray
    root: np.ndarray = field(init=False)
    depth: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        n = len(self.parent)
        self.root = np.where(self.parent >= 0, -1, np.arange(n))
        self.depth = np.zeros(n, dtype=np.int64)
        x = np.arange(n)
        for _ in range(n):  # walk every vertex to its root, all at once
            up = self.parent[x] >= 0
            if not up.any():
                break
            self.depth += up
            x = np.where(up, self.parent[x], x)
        member = (self.parent >= 0) | np.isin(np.arange(n), self.parent)
        self.root = np.where(member, x, -1)


@dataclass
class Topology:
    """Vertices, directed links and routing tiers; GPU ``i`` is vertex ``i``."""

    name: str
    num_gpus: int
    names: list[str]
    kinds: list[str]
    pos: np.ndarray  # (vertices, 2) drawing coordinates
    link_src: np.ndarray
    link_dst: np.ndarray
    link_bw: np.ndarray  # usable bytes/s per direction
    link_raw_bw: np.ndarray  # datasheet bytes/s per direction
    link_lat: np.ndarray  # seconds per hop
    link_class: np.ndarray  # NVLINK, PCI or NET
    tiers: list[Tier]
    gpus_per_node: int
    in_switch_reduction: float = 0.0  # NVLS efficiency; 0 = no in-switch reduction
    sources: tuple[str, ...] = ()  # references.bib keys behind the figures
    node: Any = None  # the NodeSpec the preset was built from (nodes.py), if any
    nic: Any = None  # the Nic of a multi-node cluster, if any
    nics_per_node: int = 0
    sharp: bool = False  # switches of the fabric reduce (InfiniBand SHARP, NCCL's CollNet)

    @property
    def num_links(self) -> int:
        return len(self.link_src)

    @property
    def gpus_per_host(self) -> int:
        """GPUs per host (operating system and PCIe tree); an NVL72 node has 18 hosts of 4."""
        return min(self.node.gpus_per_host, self.gpus_per_node) if self.node else self.gpus_per_node

    @property
    def num_nodes(self) -> int:
        return self.num_gpus // self.gpus_per_node

    def node_of(self, gpu) -> np.ndarray:
        return np.asarray(gpu) // self.gpus_per_node

    def rail_gpu(self, gpu, rail) -> np.ndarray:
        """The GPU of ``gpu``'s node that sits behind NIC ``rail % nics_per_node`` (the first of its GPUs)."""
        nics = max(self.nics_per_node, 1)
        per = self.gpus_per_node // nics
        return np.asarray(gpu) // self.gpus_per_node * self.gpus_per_node + np.asarray(rail) % nics * per

    def route(self, src, dst, rail=None) -> tuple[np.ndarray, np.ndarray]:
        """Links of the path of every transfer ``src[i] -> dst[i]``.

        Returns ``(flow, link)``: flow ``i`` crosses every ``link[j]`` with
        ``flow[j] == i``. A transfer to itself crosses nothing. ``rail``
        (an int or one per transfer; -1 for none) sends a transfer between
        nodes over that rail, as NCCL's PXN does: over NVLink to the GPU of its
        node behind NIC ``rail``, through that NIC and rail's leaf to NIC
        ``rail`` of the other node, and over NVLink to ``dst``. A channel ``c``
        of a schedule travels on rail ``c`` (:mod:`mycollectives.algorithms.channels`).
        """
        if rail is not None and self.nics_per_node:
            return self._on_rail(src, dst, rail)
        src, dst = np.asarray(src, np.int64), np.asarray(dst, np.int64)
        flows, links = [], []
        todo = np.flatnonzero(src != dst)
        for tier in self.tiers:
            if not len(todo):
                break
            rs, rd = tier.root[src[todo]], tier.root[dst[todo]]
            here = (rs >= 0) & (rs == rd)
            f, a, b = todo[here], src[todo[here]], dst[todo[here]]
            todo = todo[~here]
            while len(f):
                da, db = tier.depth[a], tier.depth[b]
                ua, ub = da >= db, db >= da  # climb the deeper side, or both
                flows += [f[ua], f[ub]]
                links += [tier.up[a[ua]], tier.down[b[ub]]]
                a = np.where(ua, tier.parent[a], a)
                b = np.where(ub, tier.parent[b], b)
                more = a != b
                f, a, b = f[more], a[more], b[more]
        if len(todo):
            raise ValueError(f"{self.name}: no route from GPU {src[todo[0]]} to GPU {dst[todo[0]]}")
        if not flows:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        return np.concatenate(flows), np.concatenate(links)

    def _on_rail(self, src, dst, rail) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`route` with rails: three legs (NVLink, network on one rail, NVLink), each a plain route."""
        src, dst = np.asarray(src, np.int64), np.asarray(dst, np.int64)
        rail = np.broadcast_to(np.asarray(rail, np.int64), src.shape)
        cross = (self.node_of(src) != self.node_of(dst)) & (rail >= 0)
        a = np.where(cross, self.rail_gpu(src, np.maximum(rail, 0)), src)
        b = np.where(cross, self.rail_gpu(dst, np.maximum(rail, 0)), dst)
        legs = [self.route(x, y) for x, y in ((src, a), (a, b), (b, dst))]
        return np.concatenate([f for f, _ in legs]), np.concatenate([k for _, k in legs])

    def path(self, src: int, dst: int) -> list[str]:
        """The vertices a transfer passes through, by name (for reading, not speed)."""
        _, links = self.route([src], [dst])
        hops = {int(self.link_src[k]): int(self.link_dst[k]) for k in links}
        out, v = [self.names[src]], src
        while v != dst:
            v = hops[v]
            out.append(self.names[v])
        return out

    def slowed(self, gpu: int, factor: float, link_class: int = NVLINK) -> Topology:
        """A copy where ``gpu``'s links of ``link_class``, both ways, run ``factor`` times slower.

        A degraded cable or a throttled GPU (chapter 4, "Stragglers").
        """
        bw = self.link_bw.copy()
        touches = (self.link_src == gpu) | (self.link_dst == gpu)
        bw[touches & (self.link_class == link_class)] /= factor
        return replace(self, link_bw=bw)

    def describe(self) -> str:
        """One line per kind of link: how many, usable and datasheet bandwidth."""
        rows = {}
        for k in range(self.num_links):
            key = (self.kinds[self.link_src[k]], self.kinds[self.link_dst[k]], self.link_bw[k])
            rows.setdefault(key, [0, self.link_raw_bw[k]])[0] += 1
        lines = [f"{self.name}: {self.num_gpus} GPUs, {self.num_links} directed links"]
        for (a, b, bw), (n, raw) in rows.items():
            lines.append(f"  {n:4d} x {a}->{b}: {bw / 1e9:7.1f} GB/s usable ({raw / 1e9:.1f} GB/s line rate)")
        return "\n".join(lines)


class Builder:
    """Assembles a :class:`Topology` vertex by vertex (used by ``presets``)."""

    def __init__(self, name: str):
        self.name = name
        self.names: list[str] = []
        self.kinds: list[str] = []
        self.pos: list[tuple[float, float]] = []
        self.links: list[tuple] = []
        self.tiers: dict[str, dict[int, tuple[int, int, int]]] = {}

    def vertex(self, name: str, kind: str, x: float, y: float) -> int:
        self.names.append(name)
        self.kinds.append(kind)
        self.pos.append((x, y))
        return len(self.names) - 1

    def cable(self, tier: str, child: int, parent: int, bw: float, raw: float, cls: int, lat=0.0) -> None:
        """Two links, ``child -> parent`` and back, and ``parent`` as ``child``'s parent in ``tier``."""
        up, down = len(self.links), len(self.links) + 1
        self.links += [(child, parent, bw, raw, lat, cls), (parent, child, bw, raw, lat, cls)]
        self.tiers.setdefault(tier, {})[child] = (parent, up, down)

    def build(self, num_gpus: int, gpus_per_node: int, **kw) -> Topology:
        n = len(self.names)
        cols = np.array(self.links, dtype=float).T if self.links else np.zeros((6, 0))
        tiers = []
        for tname, edges in self.tiers.items():
            parent, up, down = (np.full(n, -1, np.int64) for _ in range(3))
            for child, (par, u, d) in edges.items():
                parent[child], up[child], down[child] = par, u, d
            tiers.append(Tier(tname, parent, up, down))
        return Topology(
            self.name,
            num_gpus,
            self.names,
            self.kinds,
            np.array(self.pos, dtype=float),
            cols[0].astype(np.int64),
            cols[1].astype(np.int64),
            cols[2],
            cols[3],
            cols[4],
            cols[5].astype(np.int64),
            tiers,
            gpus_per_node,
            **kw,
        )
