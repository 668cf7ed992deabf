"""One rank's end of the virtual cluster: real tensors, virtual time.

A :class:`VirtualTransport` implements the package's transport protocol
(``transport/base.py``). A send starts a flow on the network at once
(eagerly: it needs no posted receive, as the local world's sends); when the
flow arrives, its bytes land in the matching receive's tensor, or are copied
aside until that receive is posted. A send is complete when its flow has
arrived, so, as in torch.distributed, a sender must not change the tensor
before then. Messages from one sender with one tag match receives in order,
within one *namespace* (the world, or a :meth:`~VirtualTransport.subgroup`).

A collective's messages are priced as the round simulator prices them:
before running a schedule the executor calls :meth:`VirtualTransport.begin`,
which charges the protocol's base latency once and looks up every round's
latency (the step latency of the slowest link class the round crosses);
each message of round ``r`` then waits that latency before its bytes
flow. The package's argument check (the handshake before a call) is
bookkeeping that NCCL does not do: its messages cost no virtual time.
Symmetric memory's rendezvous and its priced loads live in ``heap.py``.
"""

from __future__ import annotations

import collections

import numpy as np
import torch

from ..schedule import Round
from ..sim.engine import round_messages
from ..transport.base import COLLECTIVE_TAG, Label, Message, TransportBase
from ..transport.contract import Capabilities
from . import heap as _heap
from . import maestro as _m
from .compute import paused

_FREE = "(argument check)"
MAX_SPANS = 200_000


class Cluster:
    """What the ranks of a run share: scheduler, network, mailboxes, per-schedule latencies."""

    def __init__(self, maestro: _m.Maestro, net, timeout: float, world_size: int):
        self.maestro, self.net, self.timeout, self.world_size = maestro, net, timeout, world_size
        self.sends: dict[tuple, collections.deque] = collections.defaultdict(collections.deque)
        self.recvs: dict[tuple, collections.deque] = collections.defaultdict(collections.deque)
        self.latencies: dict[tuple, tuple] = {}
        self.calls: dict[tuple, _Call] = {}
        self.spans: list[list] = []  # [rank, lane, start, end]: what each rank's compute and streams did
        self._last: dict[tuple, list] = {}
        self._ids = 0
        self.meetings: dict[tuple, dict] = {}  # rendezvous of symmetric memory in progress (heap.py)
        self.heaps = 0  # rendezvous done: each one's identity

    def new_id(self) -> int:
        """An actor id after the ranks' (streams are numbered in the order they start)."""
        self._ids += 1
        return self.world_size + self._ids

    def span(self, rank: int, lane: str, start: float, end: float) -> None:
        """Record that ``rank``'s ``lane`` was busy from ``start`` to ``end`` (compute merged with the one before)."""
        if end <= start:
            return
        last = self._last.get((rank, lane))
        if last is not None and last[3] == start and lane == "compute":  # a call on a stream stays one bar
            last[3] = end
        elif len(self.spans) < MAX_SPANS:
            last = self._last[(rank, lane)] = [rank, lane, start, end]
            self.spans.append(last)

    def rounds(self, schedule, gpus: tuple) -> tuple[list[float], list[int]]:
        """Each round's latency of ``schedule`` run by ``gpus`` (as :func:`~mycollectives.sim.simulate`
        prices it) and its number of messages."""
        key = (id(schedule), gpus)
        hit = self.latencies.get(key)
        if hit is None or hit[0] is not schedule:
            where = np.asarray(gpus)
            lat, count = [], []
            for rnd in schedule.rounds:
                src, dst, _ = round_messages(rnd, len(gpus), 1) if isinstance(rnd, Round) else rnd
                lat.append(self.net.model.round_latency(where[src], where[dst]) if len(src) else 0.0)
                count.append(len(src))
            if len(self.latencies) >= 512:  # all-to-all with splits makes a schedule per call
                self.latencies.clear()
            hit = self.latencies[key] = (schedule, lat, count)
        return hit[1], hit[2]

    def call(self, key: tuple, counts: list[int], size: int) -> _Call:
        """The shared state of one collective call (the ``key``-th call of a group), made by its first rank."""
        call = self.calls.get(key)
        if call is None:
            call = self.calls[key] = _Call(counts, self.maestro)
        call.begun += 1
        if call.begun == size:  # every rank has it: forget it here
            del self.calls[key]
        return call


class _Call:
    """One collective call's rounds, in step: round ``r`` ends when all its messages have arrived,
    and no rank starts round ``r + 1`` before (the meaning of a round, ``schedule.py``)."""

    def __init__(self, counts: list[int], maestro: _m.Maestro):
        self.left, self.maestro, self.begun = list(counts), maestro, 0
        self.ends = [_m.Activity(f"round {r} to end") for r in range(len(counts))]
        self._close(-1, maestro.now)

    def arrived(self, r: int, at: float) -> None:
        self.left[r] -= 1
        if self.left[r] == 0:
            self._close(r, at)

    def _close(self, r: int, at: float) -> None:
        if r >= 0:
            self.maestro.fire(self.ends[r], at)
        while r + 1 < len(self.left) and self.left[r + 1] == 0:  # rounds without messages end too
            r += 1
            self.maestro.fire(self.ends[r], at)


class _Letter:
    """A message: the sender's tensor until it arrives, then delivered (or held as a copy until matched)."""

    __slots__ = ("src", "data", "arrived", "work")

    def __init__(self, src: torch.Tensor, arrived: _m.Activity):
        self.src, self.data, self.arrived, self.work = src, None, arrived, None

    def arrive(self, at: float) -> None:
        with paused(), torch.no_grad():
            if self.work is not None:  # its receive is posted: the bytes land in place
                self.work.land(self.src)
            else:
                self.data = self.src.clone()
        self.src = None


class VirtualWork:
    """A send or receive in flight; ``wait()`` is a simcall."""

    def __init__(
        self, transport: VirtualTransport, activity: _m.Activity, tensor: torch.Tensor | None = None
    ):
        self.t, self.activity, self.tensor = transport, activity, tensor

    def land(self, data: torch.Tensor) -> None:
        self.tensor.view(-1).copy_(data.view(-1))

    def is_completed(self) -> bool:
        return self.t.cluster.maestro.test(self.activity)

    def wait(self, timeout: float | None = None) -> bool:
        self.t.cluster.maestro.wait(_m.current(), self.activity)
        return True


class VirtualTransport(TransportBase):
    """Rank ``rank`` of a namespace whose ranks are the GPUs ``gpus`` of the cluster (see the module)."""

    local = True  # threads of one process; messages priced per schedule, a heap of its own, loads priced (heap.py)
    capabilities = Capabilities(messages=True, heap_loads=True, prices_schedules=True, hosts_heap=True)

    def __init__(self, cluster: Cluster, gpus: tuple[int, ...], rank: int, namespace=(), local_size=None):
        self.cluster, self.gpus, self.rank, self.namespace = cluster, tuple(gpus), rank, namespace
        self.world_size, self.device, self.local_size = len(self.gpus), torch.device("cpu"), local_size
        self._made: collections.Counter = collections.Counter()
        self._calls = self.heaps = 0

    @property
    def timeout(self) -> float:
        return self.cluster.timeout

    def __repr__(self) -> str:
        return f"VirtualTransport(rank {self.rank} of {self.world_size}, GPUs {self.gpus[:4]}...)"

    def group_rank(self, rank: int) -> int:
        """This group's number for ``rank`` of the run's world (as torch.distributed names ranks)."""
        try:
            return self.gpus.index(rank)
        except ValueError:
            raise ValueError(f"rank {rank} is not a member of this group {self.gpus}") from None

    def describe(self) -> tuple[str, int, str, list[int]]:  # the flight recorder's (job, rank, group, ranks)
        return f"virtual-{id(self.cluster):x}", self.gpus[self.rank], "virtual group", list(self.gpus)

    def subgroup(self, ranks, tag: int | None = None) -> VirtualTransport | None:
        """The contract's subgroup, priced on its GPUs: ``ranks`` (of this group) numbered ``0..len-1``,
        with messages of its own; None on a rank outside. Without ``tag``, members make the subgroups of
        those ranks in one order (as ``new_group``). :meth:`group_rank` maps the run's world ranks."""
        ranks = tuple(int(r) for r in ranks)
        if len(set(ranks)) != len(ranks) or not all(0 <= r < self.world_size for r in ranks):
            raise ValueError(
                f"subgroup on rank {self.rank}: ranks {ranks} must be distinct ranks of a group of {self.world_size}"
            )
        gpus = tuple(self.gpus[r] for r in ranks)
        self._made[gpus] += 1
        if self.rank not in ranks:
            return None
        ns = (*self.namespace, (gpus, self._made[gpus] if tag is None else ("tag", tag)))
        return VirtualTransport(self.cluster, gpus, ranks.index(self.rank), ns, self.local_size)

    def new_lane(self):
        from .streams import StreamLane

        return StreamLane(self)

    def join_heap(self, block, control: bool = False):
        """The rendezvous of ``block`` on this group (``HostsHeap``; see ``heap.py``)."""
        return _heap.join(self, block, control)

    # --- the executor's hook -------------------------------------------------

    def begin(self, schedule, label: str = "") -> None:
        """A schedule starts on this rank: charge the base latency, look up the rounds' latencies."""
        actor = _m.current()
        state = actor.state
        state["free"] = free = _FREE in label
        if not free:
            state["rounds"], counts = self.cluster.rounds(schedule, self.gpus)
            self._calls += 1
            state["call"] = self.cluster.call((self.namespace, self._calls), counts, self.world_size)
            actor.clock += self.cluster.net.model.base_latency

    # --- messages -------------------------------------------------------------

    def isend(self, tensor, dst, tag=0, label=None, pieces=(), latency=None, round_of=None):
        actor = _m.current()
        maestro = self.cluster.maestro
        maestro.sync(actor)
        arrived = _m.Activity(f"send to rank {dst}")  # its what names the peer for errors
        letter = _Letter(tensor.detach(), arrived)
        arrived.then.append(letter.arrive)
        if round_of:
            call, r = round_of
            arrived.then.append(lambda at: call.arrived(r, at))
        key = (self.namespace, self.rank, dst, tag)
        waiting = self.cluster.recvs[key]
        if waiting:
            self._match(waiting.popleft(), letter)
        else:
            self.cluster.sends[key].append(letter)
        nbytes = tensor.numel() * tensor.element_size()
        src_gpu, dst_gpu = self.gpus[self.rank], self.gpus[dst]
        if latency is None:
            latency = self.cluster.net.p2p_latency(src_gpu, dst_gpu)
        if latency < 0:  # free: arrives at once
            maestro.fire(arrived, maestro.now)
        else:
            self.cluster.net.post(src_gpu, dst_gpu, nbytes, latency, arrived, maestro)
        return VirtualWork(self, arrived)

    def irecv(self, tensor, src, tag=0, label=None):
        actor = _m.current()
        self.cluster.maestro.sync(actor)
        key = (self.namespace, src, self.rank, tag)
        box = self.cluster.sends[key]
        done = _m.Activity(f"receive from rank {src}" + (f" ({label.collective})" if label else ""))
        work = VirtualWork(self, done, tensor)
        if box:
            self._match(work, box.popleft())
        else:
            self.cluster.recvs[key].append(work)
        return work

    def _match(self, work: VirtualWork, letter: _Letter) -> None:
        """A receive meets its message: done when the message has arrived (now, if it has)."""
        have = (letter.src if letter.src is not None else letter.data).numel()
        if have != work.tensor.numel():
            raise ValueError(
                f"rank {work.t.rank}: a message of {have} elements met a receive of {work.tensor.numel()} "
                f"(from rank {letter.arrived.what})"
            )
        letter.work = work
        maestro = self.cluster.maestro
        if letter.arrived.done_at is not None:
            with paused(), torch.no_grad():
                work.land(letter.data)
            letter.data = None
            maestro.fire(work.activity, max(letter.arrived.done_at, maestro.now))
        else:
            letter.arrived.then.append(lambda at: maestro.fire(work.activity, at))

    def exchange(self, sends: list[Message], recvs: list[Message], label: Label):
        actor = _m.current()
        state = actor.state
        r, lat, call = label.round, None, None
        if state.get("free"):
            lat = -1.0
        elif state.get("rounds") is not None and 0 <= r < len(state["rounds"]):
            lat, call = state["rounds"][r], state["call"]
            if r > 0:
                self.cluster.maestro.wait(actor, call.ends[r - 1])
        recv_works = [self.irecv(m.tensor, m.peer, COLLECTIVE_TAG, label) for m in recvs]
        send_works = [
            self.isend(m.tensor, m.peer, COLLECTIVE_TAG, label, m.pieces, lat, call and (call, r))
            for m in sends
        ]
        return send_works, recv_works
