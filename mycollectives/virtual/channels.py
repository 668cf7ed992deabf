"""How many channels a collective gets inside a virtual run, when its caller does not say: NCCL's count.

NCCL runs a ring or tree collective on ``comm->nChannels`` channels, the
channels its topology search found, doubled (``nccl_connect``; here
:func:`mycollectives.nccl.search.system`'s ``runtime_channels``), then gives
a small call fewer: ``topoGetAlgoInfo`` (``src/enqueue.cc``, ``nccl_enqueue``)
drops one channel at a time while ``nBytes < nc * nt * threadThreshold``,
with ``nt`` the Simple protocol's 512 threads (``NCCL_SIMPLE_MAX_NTHREADS``)
and ``threadThreshold`` its 64 bytes per thread
(``NCCL_SIMPLE_THREAD_THRESHOLD``): at least 32 KiB per channel. The
collective's group decides the node count the search sees. All-to-all is
send/recv in NCCL, outside the collectives' channels: one channel here.
Registered with :func:`mycollectives.algorithms.channels.add_default` by
``mycollectives.virtual``; a caller's ``channels=`` always wins.
"""

from __future__ import annotations

from ..collectives import record
from ..nccl.search import system
from ..sim.nccl import hardware
from ..topology import Topology
from .transport import VirtualTransport

SIMPLE_THREADS = 512  # NCCL_SIMPLE_MAX_NTHREADS (src/include/device.h)
SIMPLE_THREAD_THRESHOLD = 64  # NCCL_SIMPLE_THREAD_THRESHOLD, bytes per thread (src/include/device.h)


_SEEN: dict[tuple[int, int, int], tuple[Topology, int]] = {}


def runtime_channels(topo: Topology, ranks: int, nodes: int) -> int:
    """``comm->nChannels`` of ``ranks`` GPUs of ``topo`` on ``nodes`` nodes (1 where NCCL's model has no node)."""
    key = (id(topo), ranks, nodes)
    hit = _SEEN.get(key)
    if hit is None or hit[0] is not topo:
        full = 1
        if topo.node is not None and ranks > 1 and not ranks % nodes:
            full = system(hardware(topo), ranks, nodes).runtime_channels
        if len(_SEEN) > 256:
            _SEEN.clear()
        hit = _SEEN[key] = (topo, full)
    return hit[1]


def for_call(nbytes: int, full: int) -> int:
    """The channels NCCL gives a ring or tree call of ``nbytes`` out of ``full`` (see the module).

    >>> for_call(1 << 20, 16), for_call(64 << 10, 16), for_call(1, 16)
    (16, 2, 1)
    """
    nc = full
    while nc > 1 and nbytes < nc * SIMPLE_THREADS * SIMPLE_THREAD_THRESHOLD:
        nc -= 1
    return nc


def nccl_channels(collective: str, nbytes: int, transport) -> int | None:
    """NCCL's channel count for a call on ``transport`` of a virtual run; None on other transports."""
    if not isinstance(transport, VirtualTransport):
        return None
    c = record(collective)
    if c.split or not c.carries_data:
        return 1
    topo = transport.cluster.net.topo
    nodes = len(set(topo.node_of(list(transport.gpus)).tolist()))
    return for_call(nbytes, runtime_channels(topo, transport.world_size, nodes))
