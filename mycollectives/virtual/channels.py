"""How many channels a collective gets inside a virtual run, when its caller does not say: NCCL's count.

NCCL runs a ring or tree collective on ``comm->nChannels`` channels, the
channels its topology search found, doubled (``nccl_connect``; here
:func:`mycollectives.nccl.search.system`'s ``runtime_channels``), then gives
a small call fewer: ``topoGetAlgoInfo`` (``src/enqueue.cc``, ``nccl_enqueue``)
drops one channel at a time while ``nBytes < nc * nt * threadThreshold``
(Ring on the Simple protocol: 512 threads, 256 where the ring's channels carry
no more than PCIe, and 64 bytes per thread: at least 32 KiB per channel on
NVLink). That rule has one home, :func:`mycollectives.nccl.enqueue.sized`;
this module asks it. The collective's group decides the node count the search
sees. All-to-all is send/recv in NCCL, outside the collectives' channels: one
channel here. Registered with :func:`mycollectives.algorithms.channels.add_default`
by ``mycollectives.virtual``; a caller's ``channels=`` always wins.
"""

from __future__ import annotations

from ..collectives import record
from ..nccl.enqueue import sized
from ..nccl.model import System
from ..nccl.search import system
from ..sim.nccl import hardware
from ..topology import Topology
from .transport import VirtualTransport

_SEEN: dict[tuple[int, int, int], tuple[Topology, System | None]] = {}


def system_of(topo: Topology, ranks: int, nodes: int) -> System | None:
    """NCCL's view of ``ranks`` GPUs of ``topo`` on ``nodes`` nodes (None where NCCL's model has no node)."""
    key = (id(topo), ranks, nodes)
    hit = _SEEN.get(key)
    if hit is None or hit[0] is not topo:
        s = None
        if topo.node is not None and ranks > 1 and not ranks % nodes:
            s = system(hardware(topo), ranks, nodes)
        if len(_SEEN) > 256:
            _SEEN.clear()
        hit = _SEEN[key] = (topo, s)
    return hit[1]


def for_call(nbytes: int, topo: Topology, ranks: int, nodes: int) -> int:
    """The channels NCCL gives a ring call of ``nbytes`` on ``ranks`` GPUs of ``topo`` on ``nodes`` nodes
    (:func:`~mycollectives.nccl.enqueue.sized` for Ring on Simple; 1 where NCCL's model has no node).

    >>> from mycollectives.topology import cluster
    >>> h100 = cluster("dgx_h100", 2)
    >>> for_call(1 << 30, h100, 16, 2), for_call(64 << 10, h100, 16, 2), for_call(1, h100, 16, 2)
    (16, 2, 1)
    """
    s = system_of(topo, ranks, nodes)
    return 1 if s is None else sized(s, "Ring", "Simple", nbytes, 0).channels


def nccl_channels(collective: str, nbytes: int, transport) -> int | None:
    """NCCL's channel count for a call on ``transport`` of a virtual run; None on other transports."""
    if not isinstance(transport, VirtualTransport):
        return None
    c = record(collective)
    if c.split or not c.carries_data:
        return 1
    topo = transport.cluster.net.topo
    nodes = len(set(topo.node_of(list(transport.gpus)).tolist()))
    return for_call(nbytes, topo, transport.world_size, nodes)
