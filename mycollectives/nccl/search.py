"""The channels NCCL's topology search would find on a machine (chapter 4, "Channels").

NCCL searches, for each algorithm, how many *channels* (parallel rings or
trees, one CUDA block each) it can lay over the machine's links and at how
many GB/s each (``ncclTopoCompute``, ``src/graph/search.cc`` 1074-1313,
``nccl_search``): it tries the speeds of a fixed list from the top, keeps the
solution that carries the most bandwidth, then doubles the channels and
halves their speed when that is allowed (``ncclTopoDupChannels``, 1036-1049).
:func:`system` does the same arithmetic on a machine described by a few
numbers (:class:`Hardware`), without searching paths: every GPU of a node is
assumed to reach every other over NVLink and its own NIC over PCIe, as in an
HGX board. The result feeds :mod:`mycollectives.nccl.model`. It is derived
from the search code, not from running it; ``NCCL_DEBUG_SUBSYS=GRAPH`` prints
what a real machine found.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from . import constants as K
from .model import Graph, System

_EPS = 1e-9


@dataclass(frozen=True)
class Hardware:
    """A node as NCCL's search sees it; bandwidths in NCCL's own GB/s (``src/graph/topo.cc``)."""

    arch: str  # "ampere", "hopper", "blackwell"
    gpus_per_host: int  # GPUs in one host's topology (NVLS heads come from it)
    nvlink_gbs: float  # one GPU's NVLink bandwidth: links x SMxx_NVLINK_BW
    nics_per_host: int
    nic_gbs: float  # NIC speed / 8000 (topo.cc 415-418)
    pcie_gbs: float  # GPU-to-NIC PCIe path: width x speed / 80 (topo.cc 649-657)
    nvls: bool  # NVSwitch with in-switch reduction (NVLink SHARP), Hopper and later

    @property
    def net_gbs(self) -> float:
        """GB/s of a channel's path from a GPU to its NIC, the slower of the PCIe link and the port."""
        return min(self.nic_gbs, self.pcie_gbs)


def _best(speeds, channels_at) -> tuple[int, float]:
    """The speed that carries the most in all (ties: the faster speed, tried first)."""
    best = (0, 0.0)
    for s in speeds:
        n = channels_at(s)
        if n * s > best[0] * best[1] + _EPS:
            best = (n, s)
    return best


def _dup(n: int, bw: float, arch: str) -> tuple[int, float]:
    """``ncclTopoDupChannels`` (search.cc 1036-1049): twice the channels at half the speed."""
    if n == 0 or bw < 25.0 or (arch in ("hopper", "blackwell") and bw < 50.0 and n > 4):
        return n, bw
    dup = min(2 * n, K.MAX_CHANNELS // 2)
    return dup, bw / math.ceil(dup / n)


def ring_graph(hw: Hardware, local: int, nodes: int) -> Graph:
    """Ring (and tree) channels: NVLink inside a node, one NIC per channel across nodes."""
    cap = K.MAX_CHANNELS // 2  # the ring search asks for at most MAXCHANNELS / 2 (init.cc 1177)
    if nodes == 1:
        n, s = _best(K.SPEED_INTRA[hw.arch], lambda s: min(cap, int(hw.nvlink_gbs / s + _EPS)))
    else:
        # every channel crosses one NIC; inside the node it crosses local - 1 NVLink hops of each GPU
        def fits(s: float) -> int:
            by_nic = hw.nics_per_host * int(hw.net_gbs / s + _EPS)
            by_nvlink = int(hw.nvlink_gbs * local / max(local - 1, 1) / s + _EPS) if local > 1 else cap
            return min(cap, by_nic, by_nvlink)

        n, s = _best(K.SPEED_INTER[hw.arch], fits)
    n, s = _dup(n, s, hw.arch)
    return Graph(n, s, s, nvlink=local > 1, tree_pattern=local == 1)


def nvls_graph(hw: Hardware, local: int, nodes: int) -> Graph | None:
    """One NVLS channel per head GPU, at most 32 (search.cc 1124-1137); each GPU carries
    heads + 1 channels' worth, so the speed is the fastest with ``(heads + 1) x speed``
    within its NVLink."""
    if not hw.nvls or hw.arch not in ("hopper", "blackwell"):
        return None
    heads = min(K.MAX_NVLS_ARITY, hw.gpus_per_host, local)
    if heads < 2:
        return None
    speeds = K.SPEED_INTRA[hw.arch]
    bw_intra = next((s for s in speeds if (heads + 1) * s <= hw.nvlink_gbs + _EPS), speeds[-1])
    if nodes > 1:
        bw_inter = hw.net_gbs
    else:  # pass 2 raises bwInter a step at a time while it is below twice bwIntra (search.cc 1274-1278)
        bw_inter = max(s for s in speeds if s < 2 * bw_intra or s == bw_intra)
    return Graph(heads, bw_intra, bw_inter)


def system(hw: Hardware, ranks: int, nodes: int, *, collnet: bool = False, amd_cpu: bool = False) -> System:
    """What NCCL's tuner would know about ``ranks`` GPUs spread evenly over ``nodes`` NVLink domains."""
    if ranks % nodes:
        raise ValueError(f"ranks={ranks} must be a multiple of nodes={nodes}")
    local = ranks // nodes
    ring = ring_graph(hw, local, nodes)
    graphs = {"ring": ring, "tree": ring}
    nvls = nvls_graph(hw, local, nodes)
    if nvls is not None:
        graphs["nvls"] = nvls
    if collnet:
        graphs["collnet"] = Graph(min(8, hw.gpus_per_host, local), hw.net_gbs, hw.net_gbs, nvlink=local > 1)
    runtime = min(K.MAX_CHANNELS, 2 * ring.channels)  # connect.cc 460: every search channel twice
    if hw.arch in ("hopper", "blackwell") and nodes > 1 and ring.bw_intra > 45.0 and runtime < 16:
        runtime *= 2  # connect.cc 481-483
    return System(ranks, nodes, hw.arch, graphs, runtime, amd_cpu=amd_cpu, collnet=collnet)
