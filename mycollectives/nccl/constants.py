"""NCCL 2.30.7's tuning constants, as its source has them (chapter 4, "NCCL's model").

Every table below is copied from ``src/graph/tuning.cc`` of NCCL at tag
``v2.30.7-1`` (``nccl_tuning``), or from the file named beside it, with the
line numbers it sits at there. Units are NCCL's: microseconds for latencies,
GB/s (1e9 bytes per second) for bandwidths. Tables are indexed by
``[algorithm][protocol]`` in NCCL's order (``ALGORITHMS``,
``PROTOCOLS``); ``HW_LATENCY`` first by the class of link a step crosses
(``HW``: NVLink, PCIe, network).

What changed since the release the book's earlier chapters quoted (2.19,
``nccl_tuning_219``): the ring's LL bandwidth factor is 0.5 from 2.21 on; in
2.19 and 2.20 it was 1/4 for multi-node runs and for all-reduce and reduce,
1/3 otherwise (``RING_LL_FACTOR_2_19``). The book follows 2.30.7.
"""

from __future__ import annotations

#: NCCL's algorithms, in its enumeration order (``src/include/plugin/nccl_tuner.h`` 27-53).
ALGORITHMS = ("Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT")
#: NCCL's protocols (same header).
PROTOCOLS = ("LL", "LL128", "Simple")
#: Classes of hardware a step can cross: rows of ``HW_LATENCY`` (same header).
HW = ("NVLink", "PCI", "NET")
#: GPU generations, rows of the per-generation tables (same header: VOLTA=0 ... BLACKWELL=3).
ARCHS = ("volta", "ampere", "hopper", "blackwell")


def _table(rows: list[list[float]]) -> dict[str, dict[str, float]]:
    return {a: dict(zip(PROTOCOLS, row)) for a, row in zip(ALGORITHMS, rows)}


# tuning.cc 150-155: baseLatencies, paid once per collective (us).
BASE_LATENCY = _table(
    [
        [6.8, 14.0, 8.4],  # Tree
        [6.6, 14.0, 8.4],  # Ring
        [0, 0, 0],  # CollNetDirect
        [0, 0, 0],  # CollNetChain
        [0, 0, 0],  # NVLS
        [0, 0, 0],  # NVLSTree
        [8.0, 8.0, 8.0],  # PAT
    ]
)

# tuning.cc 157-176: hwLatencies, paid per step, by the link class the step crosses (us).
HW_LATENCY = {
    "NVLink": _table(
        [[0.6, 1.25, 4.0], [0.6, 1.9, 3.4], [0, 0, 3.7], [0, 0, 2.8], [0, 0, 25], [0, 0, 25], [0, 0, 4.0]]
    ),
    "PCI": _table(
        [[1.0, 1.9, 4.0], [1.0, 2.5, 5.7], [0, 0, 3.7], [0, 0, 2.8], [0, 0, 0], [0, 0, 0], [0, 0, 4.0]]
    ),
    "NET": _table(
        [[5.0, 8.5, 14], [2.7, 4.0, 14.0], [0, 0, 31], [0, 0, 30], [0, 0, 18], [0, 0, 20.9], [0, 0, 14]]
    ),
}

# Per-generation caps; the column is N1 (one node), N2 (two nodes), N4 (three or more): tuning.cc 267.
# tuning.cc 178-183: llMaxBws. On one node the row is the GPU generation; across nodes it is the
# CPU: row 0 for Intel and others, row 1 for AMD (tuning.cc 268-271).
LL_MAX_BW = {"volta": (39.0, 39.0, 20.4), "ampere": (87.7, 22.5, 19.0), "hopper": (141.0, 45.0, 35.0),
             "blackwell": (2 * 141.0, 2 * 45.0, 2 * 35.0)}  # fmt: skip
# tuning.cc 185-190: perChMaxRingLL128Bws, per channel.
PER_CHANNEL_RING_LL128 = {"volta": 20.0, "ampere": 20.0, "hopper": 36.7, "blackwell": 40.0}
# tuning.cc 192-197: perChMaxTreeLL128Bws, per channel.
PER_CHANNEL_TREE_LL128 = {"volta": (20.0, 20.0, 20.0), "ampere": (20.0, 20.0, 20.0),
                          "hopper": (36.7, 36.7, 29.0), "blackwell": (55.6, 31.67, 20.0)}  # fmt: skip
# tuning.cc 199-204: perChMaxTreeBws, per channel.
PER_CHANNEL_TREE = {"volta": (26.5, 18.5, 10.0), "ampere": (24.0, 23.6, 17.8),
                    "hopper": (38.7, 41.4, 36.0), "blackwell": (70.0, 42.8, 24.0)}  # fmt: skip
# tuning.cc 206-211: perChMaxNVLSTreeBws, per channel.
PER_CHANNEL_NVLS_TREE = {"volta": (26.5, 18.5, 10.0), "ampere": (24.0, 23.6, 17.8),
                         "hopper": (0.0, 57.7, 45.5), "blackwell": (0.0, 96.0, 80.0)}  # fmt: skip
# tuning.cc 139-144: nvlsEfficiency, the fraction of NVLink bandwidth an in-switch reduction keeps.
NVLS_EFFICIENCY = {"volta": 0.0, "ampere": 0.0, "hopper": 0.85, "blackwell": 0.74}

# tuning.cc 327-337: the protocols' bandwidth factors in the model.
RING_LL_FACTOR = 0.5  # min(llMaxBw, 0.5 busBw), since 2.21
RING_LL_FACTOR_2_19 = {"multi-node, all-reduce or reduce": 1 / 4, "otherwise": 1 / 3}  # 2.19.3 tuning.cc 180
LL_MAX_BW_2_19 = {"hopper": (87.7, 22.5, 19.0)}  # 2.19.3 tuning.cc 89 (nccl_tuning_219)
LL128_FACTOR = 0.92  # "120.0/128.0" in the comment beside it
TREE_FACTOR = 0.92  # Tree all-reduce, every protocol
TREE_LL_FACTOR = 1 / 3.8
TREE_LL128_FACTOR = {"one node": 7 / 9, "several nodes": 120 / 128}
TREE_PATTERN_FACTOR = 0.85  # when the tree graph had to fall back to NCCL_TOPO_PATTERN_TREE
PAT_FACTOR = 0.75
COLLNET_DIRECT_HOPPER_FACTOR = 0.85  # minCompCap >= 90, tuning.cc 348
# tuning.cc 411: a ring's steps that leave the node; 405-410: the network overhead floor of the
# other steps, getNetOverhead() = 1 us on Intel and other CPUs (2 on AMD), times 3 for Simple.
NET_OVERHEAD = 1.0
NET_OVERHEAD_AMD = 2.0  # getNetOverhead() on an x86 AMD host (tuning.cc, NCCL 2.30.7)
# enqueue.cc (updateCollCostTable): an fp8 reduction on a ring of more than 8 ranks loses precision,
# so its time is multiplied by 1024, "any factor large enough" to rank every other algorithm first.
FP8_RING_RANKS, FP8_RING_PENALTY = 8, 1024.0
FP8 = ("fp8_e4m3", "fp8_e5m2")
# tuning.cc 647-650: Simple ring all-reduce across nodes pays 1.4x its latency (1.9x before Ampere)
# once every rank's share per channel is at least 64 bytes ("plateau effect of ring").
RING_PLATEAU = 1.4
# tuning.cc 420: CollNetDirect's arity serialisation, per local rank (us).
COLLNET_ARITY_LATENCY = 0.4
# tuning.cc 431-433: PAT's latency, log2(nodes) x (network latency / 3.5) + 2.8 us per rank.
PAT_LOG_DIVISOR, PAT_PER_RANK = 3.5, 2.8

# tuning.cc 623-627: treeCorrectionFactor[protocol][log2(bytes / 64)], 64 B to 512 MB.
TREE_CORRECTION = {
    "LL": (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0),
    "LL128": (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0),
    "Simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9),
}  # fmt: skip

# src/graph/topo.h 19-35 (nccl_topo): NCCL's usable bandwidth of one link, GB/s.
NVLINK_BW = {"volta": 20.0, "ampere": 20.0, "hopper": 20.6, "blackwell": 40.1}  # SM70/80/90/100_NVLINK_BW
PCI_BW = 12.0  # PCIe Gen3 x16
NET_BW = 12.0  # a 100 Gb/s NIC

# src/graph/search.cc 1051-1067 (nccl_search): the speeds (GB/s per channel) the graph search tries.
SPEED_INTRA = {
    "ampere": (40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0),
    "hopper": (60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0),
    "blackwell": (90.0, 80.0, 70.0, 60.0, 50.0, 45.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0),
}
SPEED_INTER = {
    "ampere": (
        48.0,
        30.0,
        28.0,
        24.0,
        20.0,
        18.0,
        15.0,
        12.0,
        10.0,
        9.0,
        7.0,
        6.0,
        5.0,
        4.0,
        3.0,
        2.4,
        1.2,
        0.24,
        0.12,
    ),
    "hopper": (
        48.0,
        45.0,
        42.0,
        40.0,
        30.0,
        24.0,
        22.0,
        20.0,
        17.5,
        15.0,
        12.0,
        6.0,
        3.0,
        2.4,
        1.2,
        0.24,
        0.12,
    ),
    "blackwell": (
        96.0,
        86.0,
        80.0,
        48.0,
        45.1,
        42.0,
        40.0,
        30.0,
        24.0,
        22.0,
        20.0,
        17.5,
        15.0,
        12.0,
        6.0,
        3.0,
        2.4,
        1.2,
        0.24,
        0.12,
    ),
}
SPEED_INTRA["volta"], SPEED_INTER["volta"] = SPEED_INTRA["ampere"], SPEED_INTER["ampere"]
MAX_CHANNELS = 64  # MAXCHANNELS, src/device.h 91; the ring search asks for at most half
MAX_NVLS_ARITY = 32  # NCCL_MAX_NVLS_ARITY, src/include/device.h 213: at most 32 NVLS heads

# src/transport/nvls.cc (NCCL 2.30.7): NVLS channels per architecture (NVLS_NCHANNELS_SM90 16,
# NVLS_NCHANNELS_SM100 32; NVLS_NCHANNELS_SM100_NVL 24 inside one NVLink domain, ncclNvlsTuning) and the
# chunk each NVLS head handles per loop (NCCL_NVLS_CHUNKSIZE, 128 KiB).
NVLS_CHANNELS = {"hopper": 16, "blackwell": 32}
NVLS_CHANNELS_ONE_DOMAIN = {"hopper": 16, "blackwell": 24}
NVLS_CHUNK = 128 << 10
# The NVLS all-reduce kernel runs three groups of warps in a pipeline: scatter into the NVLS
# buffer, reduce and multicast through the switch, gather out (src/device/all_reduce.h).
NVLS_STAGES = 3

# Channels and threads of one call (``topoGetAlgoInfo``, src/enqueue.cc, ``nccl_enqueue``; the
# thresholds are set in tuning.cc after the model, the limits in src/include/device.h): a Ring or
# Tree call drops channels while ``bytes < channels x threads x threshold``, then halves its threads;
# NVLS and NVLSTree run ``nvlsChannels``; the ring's LL threshold is multiplied by the ranks.
THREAD_THRESHOLD = {"LL": 8, "LL128": 8, "Simple": 64}  # NCCL_{LL,LL128,SIMPLE}_THREAD_THRESHOLD
COLLNET_THREAD_THRESHOLD = 512  # threadThresholds[COLLNET_*][SIMPLE]
MAX_NTHREADS = 640  # NCCL_MAX_NTHREADS: NVLS and CollNet blocks
MAX_THREADS = {"LL": 512, "LL128": 640, "Simple": 512}  # NCCL_{LL,LL128,SIMPLE}_MAX_NTHREADS
RING_SIMPLE_SLOW_THREADS = 256  # Ring/Simple when bwIntra x channels <= PCI_BW (tuning.cc)
WARP = 32

__all__ = [n for n in dir() if n.isupper()]
