"""NCCL's cost model: a latency and a bandwidth for every algorithm and protocol (chapter 4).

A transcription, in the package's own words, of ``ncclTopoTuneModel`` and
``ncclTopoGetAlgoTime`` in ``src/graph/tuning.cc`` of NCCL 2.30.7
(``nccl_tuning``); the comments give the lines. NCCL predicts the time of a
collective as ``latency + bytes / bandwidth`` for each (algorithm, protocol)
it may use, and runs the fastest (:func:`choose`, ``src/enqueue.cc``
2028-2117, ``nccl_enqueue``). The inputs are what NCCL's topology search
found: for each algorithm a :class:`Graph` (channels, and GB/s per channel
inside and across nodes), here derived by :mod:`mycollectives.nccl.search`.

Units are NCCL's: microseconds and GB/s. ``nbytes`` is nccl-tests' size: the
whole vector, or all ``p`` blocks of an all-gather or reduce-scatter
(``src/include/enqueue.h`` 39-41).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from . import constants as K


@dataclass(frozen=True)
class Graph:
    """One algorithm's channels as NCCL's topology search leaves them (``src/graph/search.cc``)."""

    channels: int  # search channels (the runtime uses about twice as many, connect.cc 460)
    bw_intra: float  # GB/s per channel inside a node
    bw_inter: float  # GB/s per channel across nodes
    nvlink: bool = True  # typeIntra is NVLink: steps inside a node cost NVLink latency, else PCIe
    tree_pattern: bool = False  # the search fell back to NCCL_TOPO_PATTERN_TREE (x 0.85 for Tree)


@dataclass(frozen=True)
class Func:
    """What NCCL's tuner knows about one collective (tuning.cc 289-298)."""

    name: str
    algorithms: tuple[str, ...]
    steps: str  # "2(p-1)", "p-1" or "p": a ring's steps (tuning.cc 289-291)

    def nsteps(self, p: int) -> int:
        return {"2(p-1)": 2 * (p - 1), "p-1": p - 1, "p": p}[self.steps]

    def inter_steps(self, nodes: int) -> int:
        """A ring's steps that cross the network (tuning.cc 411)."""
        if nodes == 1:
            return 0
        return 2 * (nodes - 1) if self.steps == "2(p-1)" else nodes - 1

    @property
    def gathers(self) -> bool:
        """True for all-gather and reduce-scatter, where only Ring converts bus to algorithm bandwidth (tuning.cc 377)."""
        return self.steps == "p-1"


FUNCS = {
    f.name: f
    for f in (
        Func("broadcast", ("Ring",), "p"),
        Func("reduce", ("Ring",), "p"),
        Func("all_gather", ("Ring", "PAT", "NVLS", "CollNetDirect"), "p-1"),
        Func("reduce_scatter", ("Ring", "PAT", "NVLS", "CollNetDirect"), "p-1"),
        Func("all_reduce", ("Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree"), "2(p-1)"),
    )
}


@dataclass(frozen=True)
class System:
    """A communicator as NCCL's tuner sees it."""

    ranks: int
    nodes: int  # NVLink domains (an NVL72 rack is one node)
    arch: str  # "volta", "ampere", "hopper" or "blackwell"
    graphs: dict[str, Graph]  # "ring", "tree", and "nvls" / "collnet" when available
    runtime_channels: int  # comm->nChannels
    amd_cpu: bool = False
    ll128: bool = True  # LL128 enabled (tuning.cc 518-536: NVLink inside, PXN or better across)
    collnet: bool = False  # a CollNet (SHARP) plugin is loaded and enabled
    pat: bool | None = None  # NCCL_PAT_ENABLE; None = auto: one GPU per node (tuning.cc 215-223)
    extra: dict = field(default_factory=dict)

    @property
    def ppn(self) -> float:
        return self.ranks / self.nodes

    def column(self) -> int:
        """Index into the per-generation caps: N1, N2, N4 (tuning.cc 267)."""
        return min(self.nodes, 3) - 1

    def graph(self, algorithm: str) -> Graph | None:
        """Tree and PAT share the tree graph, NVLS and NVLSTree the NVLS one (init.cc 980-981)."""
        key = {"Tree": "tree", "PAT": "tree", "Ring": "ring", "NVLS": "nvls", "NVLSTree": "nvls"}
        return self.graphs.get(key.get(algorithm, "collnet"))

    def available(self, func: str, algorithm: str, op: str = "sum") -> bool:
        """The enable rules of tuning.cc 498-512 and enqueue.cc 1998-2012, for a default build.

        ``op`` is the reduction: PAT's reduce-scatter does not scale, so NCCL never runs it for
        ``avg`` (nor a pre-multiplied sum); NVLS all-gather and reduce-scatter need every local
        rank to head a share, at most ``MAX_NVLS_ARITY`` (32) of them."""
        if algorithm not in FUNCS[func].algorithms or self.graph(algorithm) is None:
            return False
        if algorithm == "PAT" and func == "reduce_scatter" and op in ("avg", "premul_sum"):
            return False
        if algorithm == "NVLS" and FUNCS[func].gathers and self.ppn > K.MAX_NVLS_ARITY:
            return False
        if algorithm == "NVLSTree" and self.nodes == 1:
            return False
        if algorithm.startswith("CollNet") and (not self.collnet or self.ppn > 8):
            return False
        if algorithm == "NVLS" and self.nodes > 1 and not self.collnet:
            return False
        if algorithm in ("NVLS", "CollNetDirect") and FUNCS[func].gathers and self.nodes > 1:
            return False  # needs a CollNet plugin with iallgather / ireducescatter (tuning.cc 353-374)
        if algorithm == "PAT":
            return self.pat if self.pat is not None else self.nodes == self.ranks
        return True


def ll_max_bw(s: System) -> float:
    """llMaxBw: by GPU generation on one node, by CPU vendor across nodes (tuning.cc 268-272)."""
    row = s.arch if s.nodes == 1 else ("ampere" if s.amd_cpu else "volta")  # rows 1 and 0: AMD, Intel
    return K.LL_MAX_BW[row][s.column()]


def bandwidth(s: System, func: str, algorithm: str, protocol: str) -> float:
    """NCCL's algorithm bandwidth in GB/s, 0 if unavailable (tuning.cc 300-383, 537-538)."""
    f, g, a, p = FUNCS[func], s.graph(algorithm), algorithm, protocol
    if not s.available(func, a) or g is None:
        return 0.0
    if a in ("NVLS", "NVLSTree", "PAT") and p != "Simple":
        return 0.0
    if a.startswith("CollNet") and p != "Simple":
        return 0.0
    if p == "LL128" and not s.ll128:
        return 0.0
    col, ppn, nch = s.column(), s.ppn, g.channels
    collnet = a.startswith("CollNet")
    bw = g.bw_intra if s.nodes <= 2 or collnet else g.bw_inter  # 306
    if a in ("NVLS", "NVLSTree"):  # 307-323
        if nch < 2:
            return 0.0
        intra = g.bw_intra * K.NVLS_EFFICIENCY[s.arch] * (nch - 1) / nch
        intra *= 2.0 if func == "all_reduce" else (ppn - 1) / ppn  # all-reduce pipelines two operations
        inter = g.bw_inter * (2 if s.nodes <= 2 and a == "NVLSTree" else 1)
        cap = K.PER_CHANNEL_NVLS_TREE[s.arch][col] if a == "NVLSTree" else math.inf
        bw = min(intra, inter, cap)
    bus = nch * bw  # 324
    if a == "Ring" and p == "LL":  # 327
        bus = min(ll_max_bw(s), bus * K.RING_LL_FACTOR)
    if a == "Ring" and p == "LL128":  # 328-329
        bus = min(bus * K.LL128_FACTOR, nch * K.PER_CHANNEL_RING_LL128[s.arch])
    if a == "Tree" and func == "all_reduce":  # 330-331
        bus = min(bus * K.TREE_FACTOR, nch * K.PER_CHANNEL_TREE[s.arch][col])
    if a == "Tree" and p == "LL":  # 332
        bus = min(bus * K.TREE_LL_FACTOR, ll_max_bw(s))
    if a == "Tree" and p == "LL128":  # 333-335
        factor = K.TREE_LL128_FACTOR["one node" if s.nodes == 1 else "several nodes"]
        bus = min(bus * factor, nch * K.PER_CHANNEL_TREE_LL128[s.arch][col])
    if a == "Tree" and g.tree_pattern:  # 336
        bus *= K.TREE_PATTERN_FACTOR
    if a == "PAT":  # 337
        bus *= K.PAT_FACTOR
    if a == "CollNetDirect":  # 340-350
        if f.gathers:
            bus = ppn * min(g.bw_intra, g.bw_inter * 0.9)
        else:
            factor = ppn / nch  # GPUs per NIC
            bus /= factor - (factor - 1) / 2
            bus *= K.COLLNET_DIRECT_HOPPER_FACTOR if s.arch in ("hopper", "blackwell") else 1.0
    if not (a != "Ring" and f.gathers):  # 376-382: bus bandwidth to algorithm bandwidth
        bus *= s.ranks / f.nsteps(s.ranks) if a in ("Ring", "NVLS", "NVLSTree") else 0.5
    return bus


def latency(s: System, func: str, algorithm: str, protocol: str) -> float:
    """NCCL's latency in microseconds (tuning.cc 384-435)."""
    f, g, a, p = FUNCS[func], s.graph(algorithm), algorithm, protocol
    intra_hw = "NVLink" if g is None or g.nvlink else "PCI"
    lat = K.BASE_LATENCY[a][p]
    intra = K.HW_LATENCY[intra_hw][a][p]
    inter = K.HW_LATENCY["NET"]["Tree" if s.ppn == 1 else a][p]  # ppn 1: latencies fully exposed (386-388)
    local = s.ranks // s.nodes
    if a == "Ring":
        step = K.HW_LATENCY[intra_hw if s.nodes == 1 else "NET"][a][p]
        if func in ("broadcast", "reduce"):
            return lat + step  # sameChannels (396-397)
        net = K.NET_OVERHEAD_AMD if s.amd_cpu else K.NET_OVERHEAD  # getNetOverhead()
        overhead = 0.0 if s.nodes == 1 else net * (3 if p == "Simple" else 1)  # 404-409
        n_inter = f.inter_steps(s.nodes)
        return lat + (f.nsteps(s.ranks) - n_inter) * max(intra, overhead) + n_inter * inter  # 410-412
    log_nodes = int(math.log2(s.nodes))  # log2i
    if a == "Tree":
        return lat + 2 * ((local - 1) * intra + log_nodes * inter)  # 414-417
    if a == "CollNetDirect":
        return (
            lat + 2 * (min(1, local - 1) * intra + (local - 1) * K.COLLNET_ARITY_LATENCY) + inter
        )  # 418-421
    if a == "CollNetChain":
        return lat + 2 * (local - 1) * intra + inter  # 422-423
    if a == "NVLS":
        return intra + (inter if s.nodes > 1 else 0.0)  # 424-426: replaces the base latency
    if a == "NVLSTree":
        return lat + intra + 2 * log_nodes * inter  # 427-428
    return lat + log_nodes * inter / K.PAT_LOG_DIVISOR + s.ranks * K.PAT_PER_RANK  # PAT, 429-434


def latency_us(s: System, func: str, algorithm: str, protocol: str, nbytes: int) -> float:
    """The latency ``time_us`` charges: :func:`latency`, times 1.4 for a Simple ring all-reduce
    across nodes once every rank's share per channel reaches 64 bytes (tuning.cc 647-650)."""
    lat = latency(s, func, algorithm, protocol)
    per_rank = nbytes // (s.runtime_channels * s.ranks)
    if (
        algorithm == "Ring"
        and protocol == "Simple"
        and s.nodes > 1
        and func == "all_reduce"
        and per_rank >= 64
    ):
        lat *= K.RING_PLATEAU if s.arch != "volta" else 1.9
    return lat


def time_us(s: System, func: str, algorithm: str, protocol: str, nbytes: int) -> float:
    """``latency + bytes / bandwidth`` (tuning.cc 630-655); -1 when unavailable."""
    bw = bandwidth(s, func, algorithm, protocol)
    if bw == 0:
        return -1.0
    log_size = (nbytes >> 6).bit_length() - 1  # log2i(nBytes >> 6)
    if algorithm == "Tree" and func == "all_reduce" and 0 <= log_size < 23:
        bw *= K.TREE_CORRECTION[protocol][log_size]
    if algorithm == "NVLSTree" and func == "all_reduce" and 0 <= log_size < 24 and s.arch == "blackwell":
        bw *= K.TREE_CORRECTION[protocol][log_size]  # x86 hosts only in NCCL (643-646)
    return latency_us(s, func, algorithm, protocol, nbytes) + nbytes / (1000 * bw)


def choose(
    s: System,
    func: str,
    nbytes: int,
    algorithms=None,
    protocols=None,
    *,
    op: str = "sum",
    dtype: str = "float32",
) -> tuple[str, str, dict[tuple[str, str], float]]:
    """The (algorithm, protocol) NCCL runs, and its predicted time of every pair (us).

    The first minimum in NCCL's order wins (``topoGetAlgoInfo``, enqueue.cc 2035-2044);
    ``algorithms`` and ``protocols`` restrict the choice as ``NCCL_ALGO`` and
    ``NCCL_PROTO`` do. ``op`` and ``dtype`` apply ``updateCollCostTable``'s exclusions:
    no PAT reduce-scatter for ``avg`` (:meth:`System.available`), and an fp8 reduction on
    a ring of more than 8 ranks priced 1024 times its time, so that any other algorithm wins.
    """
    if func not in FUNCS:
        raise ValueError(f"NCCL's tuner models {tuple(FUNCS)}, not {func!r}")
    table = {}
    for a in K.ALGORITHMS:
        if (algorithms is not None and a not in algorithms) or not s.available(func, a, op):
            continue
        for p in K.PROTOCOLS:
            if protocols is not None and p not in protocols:
                continue
            t = time_us(s, func, a, p, nbytes)
            if t >= 0 and a == "Ring" and dtype in K.FP8 and s.ranks > K.FP8_RING_RANKS:
                t *= K.FP8_RING_PENALTY
            if t >= 0:
                table[a, p] = t
    if not table:
        raise ValueError(f"no NCCL algorithm and protocol available for {func} (algorithms={algorithms})")
    best = min(table, key=table.__getitem__)
    return best[0], best[1], table
