"""How long NCCL's pipelined algorithms take to fill and drain: the package's own model (chapter 4,
"Validation"). NCCL's tuner prices a call as latency plus bytes over bandwidth (``tuning.cc``); the
rule below (``stages - 1`` loops) is this module's, not NCCL's, built on NCCL's chunking and on the
stages its kernels run, and taught by the published points the simulator missed (chapter 4).

A ring keeps every link busy from its first step to its last: each rank sends its
own chunk at step 0 and, from then on, forwards what arrived one slice earlier, so
it has no pipeline to fill. NVLS, NVLSTree, CollNetChain and Tree are pipelines: a
chunk passes through a fixed sequence of *stages* (a warp group's primitive: a
copy, a reduction in the switch, a hop up a chain or a tree, the network), and one
*loop* (``ops`` chunks, one per channel and head) moves through all stages before
the last stage has anything to do. Filling and draining costs ``stages - 1`` loops'
time, :func:`fill_seconds`, on top of ``bytes / rate``. The chunk and the number of
concurrent chunks are NCCL's (``calcCollChunking`` and ``ncclNvlsTuning``, NCCL
2.30.7, ``nccl_enqueue``): they shrink for smaller calls, which keeps the fill a few
percent of the time down to a few hundred MiB.

The stages counted are those inside a node, as the kernels in
``src/device/all_reduce.h`` (``nccl_allreduce_kernels``) run them: scatter, switch and
gather for NVLS and for NVLSTree's node, ``2 ppn - 1`` GPUs up and down the chain of
CollNetChain and Tree. The network hops are not counted again: the latency the
simulator adds is NCCL's (``tuning.cc``), which already charges each of them
(``2 log2(nodes)`` network hops for NVLSTree and Tree, one for CollNetChain).
"""

from __future__ import annotations

from ..nccl import constants as K
from ..nccl.model import System

STEP = (4 << 20) // 8  # Simple's buffer (NCCL_BUFFSIZE 4 MiB) over NCCL_STEPS (8): one step
COLLNET_CHAIN_CHUNK = 256 << 10  # enqueue.cc: min(256 KiB, stepSize x chunkSteps)


def nvls_channels(s: System, nic: float = 0.0) -> int:
    """``comm->nvlsChannels``: 16 on Hopper; on Blackwell 24 inside one NVLink domain, 32 across
    nodes, 24 for NVLSTree on NICs of 48 GB/s or more beyond two nodes (``ncclNvlsTuning``)."""
    if s.nodes == 1 or s.arch != "blackwell":
        return (K.NVLS_CHANNELS_ONE_DOMAIN if s.nodes == 1 else K.NVLS_CHANNELS).get(s.arch, 16)
    if s.nodes == 2 and nic >= 48.0:
        return 32
    return 24 if nic >= 48.0 and (nic < 96.0 or s.ppn <= 8) else 32


def _nvls_tree_chunk(s: System, nic: float) -> int:
    """``min(nvlsChunkSize, nvlsTreeMaxChunkSize)`` before the size rules: 128 KiB chunks, at most
    64 KiB from four nodes on (nvls.cc); Blackwell's multi-node tuning picks 64 KiB for eight GPUs
    per node on NICs slower than 96 GB/s behind the GPU's PCIe switch, as on HGX boards."""
    chunk, tree = 128 << 10, None
    ppn = s.ppn
    if s.arch == "blackwell" and nic >= 48.0:
        if s.nodes == 2:
            tree = (
                256 << 10 if ppn <= 4 else 64 << 10 if ppn >= 16 or (ppn <= 8 and nic < 96.0) else 128 << 10
            )
            chunk = 256 << 10 if ppn <= 4 else chunk
        elif nic >= 96.0:
            chunk, tree = (256 << 10, 256 << 10) if ppn <= 8 else (chunk, 128 << 10 if ppn < 32 else 64 << 10)
        else:
            tree = 64 << 10
    if tree is None:
        tree = 64 << 10 if s.nodes >= 4 else chunk
    return min(chunk, tree)


def _shrink(chunk: int, nbytes: int, ops: int, rules) -> int:
    """calcCollChunking's size rules: halve (or cut) the chunk while the call is small against it."""
    for factor, smaller in rules:
        if nbytes < factor * ops * chunk and chunk > smaller:
            chunk = smaller
    return chunk


def loop_and_stages(s: System, algorithm: str, nbytes: int, nic: float = 0.0) -> tuple[int, int]:
    """Bytes of the call one loop moves (``ops x chunk``) and the stages a chunk passes; ``nic``
    is one NIC's GB/s as NCCL counts it (Blackwell's NVLSTree tuning reads it)."""
    heads = min(K.MAX_NVLS_ARITY, int(s.ppn))
    if algorithm == "NVLS" and s.nodes == 1:
        ops = nvls_channels(s) * heads
        chunk = _shrink(K.NVLS_CHUNK, nbytes, ops, ((64, 65536), (8, 32768), (2, 16384)))
        return ops * chunk, K.NVLS_STAGES
    if algorithm == "NVLSTree":
        ops = nvls_channels(s, nic) * heads
        rules = ((32, 262144), (16, 131072), (4, 65536), (1, 32768))
        chunk = _shrink(_nvls_tree_chunk(s, nic), nbytes, ops, rules)
        return ops * chunk, K.NVLS_STAGES
    if algorithm == "CollNetChain":
        ops, depth, chunk = s.runtime_channels, int(s.ppn), COLLNET_CHAIN_CHUNK
        for factor, floor in ((64, 131072), (8, 65536), (1, 32768)):
            while nbytes // (ops * chunk) < depth * factor and chunk > floor:
                chunk //= 2
        return ops * chunk, 2 * depth - 1  # up the chain and down again
    if algorithm == "Tree":
        return s.runtime_channels * STEP, 2 * int(s.ppn) - 1
    return 0, 1


def fill_seconds(s: System, algorithm: str, nbytes: int, rate: float, nic: float = 0.0) -> float:
    """Seconds a pipelined algorithm spends filling and draining: ``(stages - 1)`` loops at ``rate``
    (bytes of the call per second); 0 for Ring, PAT and all-to-all, and for protocols other than
    Simple, which the callers do not pass here."""
    loop, stages = loop_and_stages(s, algorithm, nbytes, nic)
    loop = min(loop, nbytes)  # a call smaller than one loop is cut into per-channel shares (ncclCollCbdPart)
    return (stages - 1) * loop / rate if loop and rate > 0 else 0.0
