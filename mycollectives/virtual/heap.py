"""Symmetric memory on the virtual cluster: the peers' buffers read where they lie, loads in virtual time.

The ranks of a run are threads of one process, so a rank's block of the heap
(:func:`mycollectives.symmetric.empty`) is already readable by its peers: a
rendezvous (:func:`join`) only hands every rank the others' blocks, through
the :class:`~mycollectives.virtual.transport.Cluster` they share, and checks
them as the process heap's rendezvous does (in the heap on every rank, the
same size, one node). Its handle, a :class:`VirtualHeap`, is the process
heap's :class:`~mycollectives.symmetric.SymmetricMemory` with time made virtual:

* **Loads** (:meth:`VirtualHeap.loads`, called by :mod:`mycollectives.loadstore`
  each round): a collective pays the protocol's base latency once, on its
  round 0; in round ``r`` a rank's reads from a peer are one flow of their
  bytes from the peer's GPU to its own, over the topology's route, after that
  route's step latency: exactly what a message of that size costs
  (:mod:`.transport`), sharing links with every flow in flight.
* **Barriers** (:meth:`VirtualHeap.barrier`): every rank waits for the last
  to arrive, then for the latency of one round in which every rank raises a
  flag in every peer's signal pad (on one DGX node, an NVLink step: 3.4 us
  under the Simple protocol). The control block's barriers (the argument
  check's, which NCCL does not do) cost nothing, as the argument check's
  messages cost nothing on the message path.
* **Signals** (:meth:`~VirtualHeap.put_signal`, :meth:`~VirtualHeap.wait_signal`):
  a flag lands in the peer's pad that same latency later and wakes it.
"""

from __future__ import annotations

import os

import numpy as np
import torch

from ..symmetric.attach import refusal
from ..symmetric.handle import CHANNELS, SymmetricMemory
from . import maestro as _m
from .compute import paused


class _Group:
    """What the handles of one rendezvous share: their barriers in flight and their latency."""

    def __init__(self, latency: float):
        self.latency = latency
        self.pending: dict[tuple[int, int], list] = {}  # (channel, n) -> [arrived, Activity]
        self.asleep: dict[tuple[int, int], _m.Activity] = {}  # (rank, channel) -> what wakes it


class VirtualHeap(SymmetricMemory):
    """One rank's handle of a rendezvous on the virtual cluster (see the module)."""

    prices_loads = True

    def __init__(self, transport, blocks: list, group: _Group, ident: int):
        p = len(blocks)
        segs = [b.mirror for b in blocks]
        super().__init__(transport.rank, p, segs, blocks[0].nbytes, [os.getpid()] * p, transport.timeout)
        self.ident, self._t, self._group = ident, transport, group
        self._passed = np.zeros(CHANNELS, dtype=np.int64)  # barriers this rank has passed, per channel
        self.barriers = 0  # priced barriers passed (loads' and the user's)

    def loads(self, r: int, reads) -> None:
        """This rank reads ``nbytes`` from each ``(src, nbytes)`` in round ``r`` (round 0 starts a call,
        which pays the base latency): wait until all arrive."""
        actor, cluster, gpus = _m.current(), self._t.cluster, self._t.gpus
        maestro, net = cluster.maestro, cluster.net
        if r == 0:
            actor.clock += net.model.base_latency
        maestro.sync(actor)
        arrivals = []
        for src, nbytes in reads:
            done = _m.Activity(f"load from rank {src}")
            net.post(
                gpus[src],
                gpus[self.rank],
                nbytes,
                net.step_latency(gpus[src], gpus[self.rank]),
                done,
                maestro,
            )
            arrivals.append(done)
        for done in arrivals:
            maestro.wait(actor, done)

    def barrier(self, channel: int = 0, timeout: float | None = None) -> None:
        """Every rank waits for all of them, then for the group's latency (see the module)."""
        actor, maestro = _m.current(), self._t.cluster.maestro
        maestro.sync(actor)
        self._passed[channel] += 1
        key = (channel, int(self._passed[channel]))
        entry = self._group.pending.setdefault(key, [0, _m.Activity(f"meet at barrier {key[1]}")])
        entry[0] += 1
        if entry[0] == self.world_size:
            del self._group.pending[key]
            maestro.fire(entry[1], maestro.now + self._group.latency)
        self.barriers += self._group.latency > 0
        maestro.wait(actor, entry[1])

    def put_signal(self, dst: int, channel: int = 0) -> None:
        """Raise this rank's flag in ``dst``'s pad; it lands one step latency later (and wakes ``dst``)."""
        actor, maestro, gpus = _m.current(), self._t.cluster.maestro, self._t.gpus
        maestro.sync(actor)
        flags, me, group = self._flags[dst], self.rank, self._group

        def land(at: float) -> None:
            flags[channel, me] += 1
            woken = group.asleep.pop((dst, channel), None)
            if woken is not None:
                maestro.fire(woken, at)

        sent = _m.Activity(f"signal rank {dst}")
        sent.then.append(land)
        self._t.cluster.net.post(gpus[me], gpus[dst], 0, group.latency, sent, maestro)

    def _await(self, channel: int, sources: list[int], timeout: float | None) -> None:
        """Wait in virtual time until every one of ``sources`` has signalled once more (``timeout``:
        the maestro finds a wait that nothing can end, as a deadlock)."""
        want = self._expected[channel]
        want[sources] += 1
        pad, actor, maestro = self._flags[self.rank][channel], _m.current(), self._t.cluster.maestro
        maestro.sync(actor)
        while not all(pad[s] >= want[s] for s in sources):
            late = next(s for s in sources if pad[s] < want[s])
            woken = self._group.asleep[(self.rank, channel)] = _m.Activity(f"signal from rank {late}")
            maestro.wait(actor, woken)


def join(transport, block, control: bool = False) -> VirtualHeap:
    """The rendezvous of ``block`` (None: this rank's tensor is outside the heap) on ``transport``'s
    group; ``control``: the group's control block, whose barriers cost nothing. Collective."""
    cluster, actor = transport.cluster, _m.current()
    maestro = cluster.maestro
    maestro.sync(actor)
    transport.heaps += 1
    key = (transport.namespace, transport.heaps)
    meeting = cluster.meetings.setdefault(key, {"blocks": {}, "all": _m.Activity("join the rendezvous")})
    meeting["blocks"][transport.rank] = block
    if len(meeting["blocks"]) == transport.world_size:
        del cluster.meetings[key]
        cluster.heaps += 1
        meeting["ident"] = cluster.heaps
        meeting["group"] = _Group(0.0 if control else _barrier_latency(transport))
        maestro.fire(meeting["all"], maestro.now)
    maestro.wait(actor, meeting["all"])
    blocks = [meeting["blocks"][r] for r in range(transport.world_size)]
    with paused(), torch.no_grad():
        rows = torch.zeros((len(blocks), 7), dtype=torch.int64)
        for r, b in enumerate(blocks):
            node = int(cluster.net.topo.node_of(transport.gpus[r]))
            rows[r, :4] = torch.tensor([b is not None, node, 0, b.nbytes if b is not None else 0])
        if (why := refusal(transport.rank, rows)) is not None:
            raise ValueError(f"rendezvous on rank {transport.rank}: {why}")
        return VirtualHeap(transport, blocks, meeting["group"], meeting["ident"])


def _barrier_latency(transport) -> float:
    """One round in which every rank of the group writes a flag to every peer."""
    p = transport.world_size
    if p < 2:
        return 0.0
    src, dst = np.nonzero(~np.eye(p, dtype=bool))
    gpus = np.asarray(transport.gpus)
    return transport.cluster.net.model.round_latency(gpus[src], gpus[dst])
