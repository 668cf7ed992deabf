"""NCCL's algorithms on a simulated cluster: what NCCL picks, how long it takes (chapter 4).

Three steps, each a separate function:

1. :func:`system` tells NCCL's cost model (:mod:`mycollectives.nccl`) what its
   topology search would find on the machine;
2. :func:`choose` asks that model which (algorithm, protocol) NCCL runs, as
   NCCL does, among NCCL's own algorithms only (Ring, Tree, NVLS, NVLSTree,
   CollNetDirect, CollNetChain, PAT);
3. :func:`~mycollectives.sim.simulate_nccl` lays the algorithm's channels over the machine
   (:mod:`mycollectives.sim.channels`), adds up the bytes every link carries,
   and prices the collective at NCCL's latency plus the time its busiest link
   needs: ``T = latency + max over links (bytes / usable bandwidth)``, plus the
   fill and drain of a pipelined algorithm (``mycollectives.sim.pipeline``).

The bandwidth side uses the links (NVLink at what NCCL's ring search allots
a GPU, ``nvlink_achievable()``) and the protocol's data efficiency (LL 0.5,
LL128 0.92, Simple 1; NVLS at NCCL's in-switch efficiency) with the protocols'
own ceilings (LL's ``llMaxBw``, LL128's per-channel maximum); the further
factors NCCL's tuner uses to steer its choice are not applied to the time.
All-to-all, which NCCL runs as grouped sends and receives with no tuner
model, is priced by the same link loads with Simple's latency.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ..algorithms import canonical
from ..collectives import busbw_factor
from ..nccl import constants as K
from ..nccl import model
from ..nccl.search import Hardware, ring_graph
from ..nccl.search import system as search_system
from ..topology import Topology
from ..topology.graph import NVLINK
from ..topology.nodes import PCIE_RAW, PCIE_USABLE_FRACTION
from . import channels as ch
from . import pipeline
from .result import SimResult

EFFICIENCY = {"LL": K.RING_LL_FACTOR, "LL128": K.LL128_FACTOR, "Simple": 1.0}
P2P = "P2P"  # what NCCL runs for all-to-all: grouped send/recv, no algorithm choice
_NAMES = {a.lower(): a for a in (*K.ALGORITHMS, P2P)} | {p.lower(): p for p in K.PROTOCOLS}


def nccl_name(name: str) -> str:
    """NCCL's spelling of an algorithm or protocol name, whatever its case (``"nvlstree"`` -> ``"NVLSTree"``)."""
    try:
        return _NAMES[name.lower()]
    except (KeyError, AttributeError):
        raise ValueError(
            f"unknown NCCL algorithm or protocol {name!r}; expected one of {tuple(_NAMES.values())}"
        ) from None


def _shape(topo: Topology, world_size: int | None) -> tuple[int, int]:
    """(nodes, ranks per node) of a world of ``world_size`` ranks, filled node by node."""
    p = world_size or topo.num_gpus
    g = topo.gpus_per_node
    if p < 1 or p > topo.num_gpus or (p > g and p % g):
        raise ValueError(
            f"world_size={p}: expected 1..{g} ranks on one node or a multiple of {g} up to {topo.num_gpus}"
        )
    return (1, p) if p <= g else (p // g, g)


def hardware(topo: Topology) -> Hardware:
    """The numbers NCCL's search reads off a preset (``nccl_topo`` units, GB/s).

    On a multi-host NVLink domain (an NVL72 rack) NCCL fuses the topologies of
    all its hosts before searching (``src/graph/topo.cc`` 1886-1925), so the
    search sees the whole domain: all its GPUs and NICs.
    """
    if topo.node is None:
        raise ValueError(f"{topo.name} is not built from a node preset; NCCL's model needs cluster(...)")
    spec, nic = topo.node, topo.nic
    pcie = PCIE_RAW[min(spec.pcie, nic.pcie) if nic else spec.pcie] * PCIE_USABLE_FRACTION / 1e9
    return Hardware(
        arch=spec.arch,
        gpus_per_host=topo.gpus_per_node,
        nvlink_gbs=spec.nvlinks * spec.nvlink_usable / 1e9,
        nics_per_host=max(1, topo.nics_per_node),
        nic_gbs=nic.raw / 1e9 if nic else 0.0,
        pcie_gbs=pcie,
        nvls=topo.in_switch_reduction > 0,
    )


def system(topo: Topology, world_size: int | None = None) -> model.System:
    """What NCCL's tuner would know about ``world_size`` ranks of ``topo``."""
    nodes, local = _shape(topo, world_size)
    return search_system(hardware(topo), nodes * local, nodes, collnet=topo.sharp)


def choose(collective: str, nbytes: int, topo: Topology, world_size: int | None = None, algorithms=None,
           protocols=None, *, op: str = "sum", dtype: str = "float32",
           amd_cpu: bool = False) -> tuple[str, str, dict[tuple[str, str], float]]:  # fmt: skip
    """The (algorithm, protocol) NCCL's tuner runs, and its predicted time of every pair (seconds);
    ``op``, ``dtype`` and ``amd_cpu`` select NCCL's exclusions and its AMD network overhead."""
    c = canonical(collective)
    if c == "all_to_all":
        return P2P, "Simple", {(P2P, "Simple"): float("nan")}
    algos = None if algorithms is None else [nccl_name(a) for a in algorithms]
    protos = None if protocols is None else [nccl_name(p) for p in protocols]
    s = system(topo, world_size)
    if amd_cpu:
        s = replace(s, amd_cpu=True)
    a, p, table = model.choose(s, c, int(nbytes), algos, protos, op=op, dtype=dtype)
    return a, p, {k: v * 1e-6 for k, v in table.items()}


def traffic(collective: str, algorithm: str, topo: Topology, world_size: int | None = None) -> ch.Traffic:
    """The hops and switch flows of one NCCL algorithm on ``topo`` (bytes per byte of the call)."""
    c, a = canonical(collective), nccl_name(algorithm)
    nodes, local = _shape(topo, world_size)
    gpn, p = topo.gpus_per_node, nodes * local
    s = search_system(hardware(topo), p, nodes, collnet=topo.sharp)
    nic_gpus = gpn // topo.nics_per_node if topo.nics_per_node else 1
    nch = s.runtime_channels
    heads = min(K.MAX_NVLS_ARITY, local)  # NVLS heads: one per GPU, at most 32 (search.cc 1126-1127)
    if c == "all_to_all" and a == P2P:
        return ch.all_to_all(nodes, local, gpn)
    if a == "Ring" and c in model.FUNCS:
        per_hop = {"all_reduce": 2 * (p - 1) / p, "all_gather": (p - 1) / p, "reduce_scatter": (p - 1) / p}
        return ch.ring(nodes, local, gpn, nch, per_hop.get(c, 1.0), nic_gpus)
    if a == "Tree" and c == "all_reduce":
        return ch.tree(nodes, local, gpn, nch, nic_gpus)
    if a == "NVLS" and c in ("all_reduce", "all_gather", "reduce_scatter") and topo.in_switch_reduction:
        out = ch.nvls(nodes, local, gpn, heads, c)
        if nodes > 1:  # NVLS across nodes is NVLS with SHARP in the network (CollNet)
            out.net_up = out.net_down = (np.arange(nodes * gpn) % gpn < local) / local
        return out
    if a == "NVLSTree" and c == "all_reduce" and topo.in_switch_reduction and nodes > 1:
        return ch.nvls_tree(nodes, local, gpn, heads, nic_gpus)
    if a in ("CollNetDirect", "CollNetChain") and c == "all_reduce" and nodes > 1:
        return ch.collnet(nodes, local, gpn, nch, nic_gpus, direct=a == "CollNetDirect")
    if a == "PAT" and c in ("all_gather", "reduce_scatter") and local == 1:
        return ch.pat(p, c)
    raise ValueError(f"NCCL's {a} does not run {c} on {topo.name} with {p} ranks")


def nvlink_achievable(topo: Topology) -> np.ndarray:
    """Usable bytes/s of every link, NVLink at what NCCL's ring search allots one GPU.

    ``topo.link_bw`` prices NVLink at NCCL's topology constant (``SM90_NVLINK_BW`` x links, 370.8
    GB/s on an H100). NCCL's graph search lays rings over it at the speeds of its table
    (``speedArrayIntra``, ``src/graph/search.cc``, NCCL 2.30.7) and keeps the channels that fit
    whole: on one node the Ring graph carries channels x bwIntra per GPU, the bus bandwidth
    NCCL's tuner gives its Ring (``src/graph/tuning.cc``): 6 x 60 = 360 GB/s on Hopper, 8 x 90 =
    720 on Blackwell, and on Ampere the whole 240 (6 x 40). :func:`mycollectives.nccl.search.ring_graph`
    does that arithmetic; nothing here is fitted.
    """
    spec = topo.node
    if spec is None:
        return topo.link_bw
    ring = ring_graph(hardware(topo), topo.gpus_per_node, 1)
    allotted = ring.channels * ring.bw_intra * 1e9  # bytes/s per GPU
    bw = topo.link_bw.copy()
    bw[topo.link_class == NVLINK] *= min(1.0, allotted / spec.nvlink_per_gpu)
    return bw


def link_loads(topo: Topology, t: ch.Traffic) -> tuple[np.ndarray, np.ndarray]:
    """Bytes per collective byte on every link: from hops, and from flows into reducing switches."""
    hop = np.zeros(topo.num_links)
    if len(t.src):
        direct = t.via < 0
        first_dst = np.where(direct, t.dst, t.via)
        for src, dst, w in (
            (t.src, first_dst, t.weight),
            (t.via[~direct], t.dst[~direct], t.weight[~direct]),
        ):
            flow, link = topo.route(src, dst)
            hop += np.bincount(link, weights=w[flow], minlength=topo.num_links)
    switch = np.zeros(topo.num_links)
    for tier_name, up, down in (("nvswitch", t.switch_up, t.switch_down), ("network", t.net_up, t.net_down)):
        if up is None:
            continue
        tier = next(x for x in topo.tiers if x.name == tier_name)
        gpus = np.flatnonzero(up + down)
        hops = 2 if tier_name == "network" else 1  # up to the NIC and on to its leaf switch
        v = gpus
        for _ in range(hops):
            np.add.at(switch, tier.up[v], up[gpus])
            np.add.at(switch, tier.down[v], down[gpus])
            v = tier.parent[v]
    return hop, switch


def _cap(s: model.System, c: str, a: str, proto: str) -> float:
    """What one channel's kernel can move, whatever the links, as algorithm bandwidth (bytes/s).

    NCCL's tuner caps each channel (tuning.cc, NCCL 2.30.7): LL and LL128 by their
    per-channel ceilings, NVLSTree by ``perChMaxNVLSTreeBws``. The last is the cost of NVLSTree's network leg: a channel
    that also sends up and receives down a tree splits its 20 warps (NCCL_MAX_NTHREADS 640) into 5 that reduce in
    the switch and send to the network, 4 that receive from it and multicast, and 11
    that copy in and out (``src/device/all_reduce.h``), where single-node NVLS gives the
    switch work the whole channel; the links would allow more than those warps move.
    """
    if c not in model.FUNCS:
        return math.inf
    g = s.graph(a)
    col = s.column()
    f = model.FUNCS[c]
    if proto == "Simple" and a == "NVLSTree" and c == "all_reduce":
        return g.channels * K.PER_CHANNEL_NVLS_TREE[s.arch][col] * s.ranks / f.nsteps(s.ranks) * 1e9
    if a not in ("Ring", "Tree") or proto == "Simple":
        return math.inf
    if proto == "LL":
        bus = model.ll_max_bw(s)
    elif a == "Ring":
        bus = g.channels * K.PER_CHANNEL_RING_LL128[s.arch]
    else:
        bus = g.channels * K.PER_CHANNEL_TREE_LL128[s.arch][col]
    ratio = s.ranks / f.nsteps(s.ranks) if a == "Ring" else 0.5
    return bus * ratio * 1e9


def _latency(s: model.System, c: str, a: str, proto: str, nbytes: int) -> float:
    if a == P2P:  # Simple's base latency, and one step per group of 8 peers (NCCL_MAX_DEV_WORK_P2P_PER_BATCH)
        hw = K.HW_LATENCY["NET" if s.nodes > 1 else "NVLink"]["Ring"]["Simple"]
        return (K.BASE_LATENCY["Ring"]["Simple"] + math.ceil((s.ranks - 1) / 8) * hw) * 1e-6
    return model.latency_us(s, c, a, proto, int(nbytes)) * 1e-6


def simulate_nccl(
    collective: str,
    algorithm: str,
    nbytes: int,
    topology: Topology,
    *,
    protocol: str = "Simple",
    world_size: int | None = None,
) -> SimResult:
    """NCCL's ``algorithm`` and ``protocol`` for ``nbytes`` (nccl-tests' size) on ``topology``.

    The result's ``time_s`` is NCCL's latency plus the busiest link's time; its
    ``bound_busbw`` is the busbw the links alone allow (line rates, no protocol,
    no latency). Introduced in chapter 4, "Channels".

    >>> from mycollectives.topology import dgx_h100
    >>> r = simulate_nccl("all_reduce", "NVLS", 8 << 30, dgx_h100(nvls=True))
    >>> 465 < r.busbw < 480  # published: about 480 GB/s on 8 H100 (nccl-tests issue 212)
    True
    """
    c, a, proto = canonical(collective), nccl_name(algorithm), nccl_name(protocol)
    if a in ("NVLS", "NVLSTree", "PAT", "CollNetDirect", "CollNetChain", P2P) and proto != "Simple":
        raise ValueError(f"NCCL runs {a} with the Simple protocol only, not {proto}")
    nodes, local = _shape(topology, world_size)
    p = nodes * local
    s = search_system(hardware(topology), p, nodes, collnet=topology.sharp)
    hop, switch = link_loads(topology, traffic(c, a, topology, world_size))
    bw = nvlink_achievable(topology)
    nvls_eff = topology.in_switch_reduction or 1.0
    per_byte = hop / (bw * EFFICIENCY[proto]) + switch / (bw * nvls_eff)  # seconds per collective byte
    busiest = int(np.argmax(per_byte))
    rate = min(1.0 / per_byte[busiest] if per_byte[busiest] > 0 else math.inf, _cap(s, c, a, proto))
    latency = _latency(s, c, a, proto, nbytes)
    fill = pipeline.fill_seconds(s, a, nbytes, rate, hardware(topology).nic_gbs) if proto == "Simple" else 0.0
    bandwidth_time = nbytes / rate + fill if nbytes else 0.0
    total = (hop + switch) / topology.link_raw_bw
    bound = busbw_factor(c, p) / total.max() / 1e9 if total.max() > 0 else math.inf
    keep = topology.num_links <= 4_000_000
    return SimResult(
        collective=c,
        algorithm=a,
        protocol=proto,
        nbytes=int(nbytes),
        world_size=p,
        topology=topology,
        time_s=float(latency + bandwidth_time),
        bus_factor=busbw_factor(c, p),
        round_start=np.array([latency]),
        round_time=np.array([bandwidth_time]),
        round_flows=np.array([len(np.flatnonzero(hop + switch))]),
        round_busiest=np.array([busiest]),
        link_bytes=(hop + switch) * nbytes,
        round_link_bytes=((hop + switch) * nbytes)[None, :].astype(np.float32) if keep else None,
        latency_s=latency,
        bound_busbw=float(bound),
        channels=s.runtime_channels,
    )
