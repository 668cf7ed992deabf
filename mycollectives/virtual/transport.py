"""One rank's end of the virtual cluster: real tensors, virtual time.

A :class:`VirtualTransport` implements the package's transport protocol (``transport/base.py``). A send
starts a flow on the network at once (eagerly: it needs no posted receive, as the local world's sends);
when the flow arrives, its bytes land in the matching receive's tensor, or are copied aside until that
receive is posted. A send is complete when its flow has arrived (as in torch.distributed, a sender must
not change the tensor before then). Messages from one sender with one tag match receives in order, within
one *namespace* (the world, or a :meth:`~VirtualTransport.subgroup`).

Messages, not rounds (SMPI's way): every message, a user's send or one of a collective's, is a flow from
the moment its sender posts it, after its own latency
(:meth:`~mycollectives.virtual.network.Network.step_latency`: the protocol's step latency of the slowest
link class on its route, on its channel's rail between nodes). Nothing waits for a round to end: a rank
goes on as soon as its own receives are in, exactly as far as the executor lets it, so one slow link
delays only the ranks that wait on its message.

The strands of a call's channels run apart (``channels_apart``): each strand's messages carry a tag of
their own, and :meth:`VirtualTransport.wait_any` lets the rank go on with whichever strand's message is in
first, so each channel's ring moves at its own pace, as NCCL's do. A message may be a strided view of
several pieces (``strided_messages``): it lands as it is, with no packing copy.

Where NCCL's per-call base latency is charged, without the executor knowing virtual time: on a call's
first message. :meth:`VirtualTransport.exchange` is handed each round's
:class:`~mycollectives.transport.message.Label`; a label whose collective or algorithm differs from the
one before, or whose round is not later than the last of its strand, starts a new call (a call's rounds
only go forward), and the rank is charged the protocol's base latency before posting it. A user's send is
a call of its own: its message waits base plus step latency. The package's argument check (the handshake
before a call) is bookkeeping that NCCL does not do: its messages cost no virtual time, nor do its
reductions. Symmetric memory's rendezvous and its priced loads live in ``heap.py``.
"""

from __future__ import annotations

import collections

import torch

from ..transport.base import TransportBase
from ..transport.contract import Capabilities
from ..transport.message import COLLECTIVE_TAG, Label, Message
from . import heap as _heap
from . import maestro as _m
from . import tuning as _tuning
from .compute import paused

_FREE = "(argument check)"
MAX_SPANS = 200_000


class Cluster:
    """What the ranks of a run share: scheduler, network, mailboxes."""

    def __init__(self, maestro: _m.Maestro, net, timeout: float, world_size: int):
        self.maestro, self.net, self.timeout, self.world_size = maestro, net, timeout, world_size
        self.sends: dict[tuple, collections.deque] = collections.defaultdict(collections.deque)
        self.recvs: dict[tuple, collections.deque] = collections.defaultdict(collections.deque)
        self.spans: list[list] = []  # [rank, lane, start, end]: what each rank's compute and streams did
        self._last: dict[tuple, list] = {}
        self._ids = 0
        self.meetings: dict[tuple, dict] = {}  # rendezvous of symmetric memory in progress (heap.py)
        self.heaps = 0  # rendezvous done: each one's identity
        self.nccl_calls: list = []  # what NCCL would have run, call by call (tuning.py)
        self.priced: dict = {}  # NCCL's choices priced so far, and their protocols' latencies (tuning.py)

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


class _Letter:
    """A message: the sender's tensor until it arrives, then delivered (or held as a copy until matched)."""

    __slots__ = ("src", "data", "arrived", "work")

    def __init__(self, src: torch.Tensor, arrived: _m.Activity):
        self.src, self.data, self.arrived, self.work = src, None, arrived, None

    def arrive(self, at: float) -> None:
        with paused(), torch.no_grad():
            if self.work is not None:  # its receive is posted: the bytes land in place
                self.work.land(self.src)
            else:  # a meta tensor's copy is a new meta tensor (its clone, if strided, runs Python kernels)
                src = self.src
                self.data = (
                    torch.empty(src.shape, dtype=src.dtype, device="meta") if src.is_meta else src.clone()
                )
        self.src = None


class VirtualWork:
    """A send or receive in flight; ``wait()`` is a simcall."""

    def __init__(
        self, transport: VirtualTransport, activity: _m.Activity, tensor: torch.Tensor | None = None
    ):
        self.t, self.activity, self.tensor = transport, activity, tensor

    def land(self, data: torch.Tensor) -> None:
        into = self.tensor
        if into.shape != data.shape:  # one of them a strided view of several pieces (strided_messages)
            if data.is_contiguous():
                data = data.view(into.shape)
            elif into.is_contiguous():
                into = into.view(data.shape)
            else:
                data = data.reshape(into.shape)
        into.copy_(data)

    def is_completed(self) -> bool:
        return self.t.cluster.maestro.test(self.activity)

    def wait(self, timeout: float | None = None) -> bool:
        self.t.cluster.maestro.wait(_m.current(), self.activity)
        return True


class VirtualTransport(TransportBase):
    """Rank ``rank`` of a namespace whose ranks are the GPUs ``gpus`` of the cluster (see the module)."""

    local = True  # ranks are threads of one process
    # messages; symmetric memory of its own, its loads priced (heap.py)
    capabilities = Capabilities(
        messages=True, heap_loads=True, hosts_heap=True, channels_apart=True, strided_messages=True
    )

    def __init__(self, cluster: Cluster, gpus: tuple[int, ...], rank: int, namespace=(), local_size=None):
        self.cluster, self.gpus, self.rank, self.namespace = cluster, tuple(gpus), rank, namespace
        self.world_size, self.device, self.local_size = len(self.gpus), torch.device("cpu"), local_size
        self._made: collections.Counter = collections.Counter()
        self.heaps = 0

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

    # --- messages -------------------------------------------------------------

    def isend(self, tensor, dst, tag=0, label=None, latency=None, rail: int = -1, wire: float = 1.0):
        """Post a message: a flow from now, after ``latency`` (None: a user's send, a call of its own;
        negative: free, it arrives at once), on ``rail`` between nodes (-1: the plain route); ``wire``:
        bytes on the wire per byte of data (the protocol's flags, ``tuning.py``)."""
        actor = _m.current()
        maestro = self.cluster.maestro
        maestro.sync(actor)
        arrived = _m.Activity(f"send to rank {dst}")  # its what names the peer for errors
        letter = _Letter(tensor.detach() if tensor.requires_grad else tensor, arrived)
        arrived.then.append(letter.arrive)
        key = (self.namespace, self.rank, dst, tag)
        waiting = self.cluster.recvs[key]
        if waiting:
            self._match(waiting.popleft(), letter, self.rank)
        else:
            self.cluster.sends[key].append(letter)
        nbytes = int(tensor.numel() * tensor.element_size() * wire)
        src_gpu, dst_gpu = self.gpus[self.rank], self.gpus[dst]
        if latency is None:
            latency = self.cluster.net.p2p_latency(src_gpu, dst_gpu)
        if latency < 0:  # free: arrives at once
            maestro.fire(arrived, maestro.now)
        else:
            self.cluster.net.post(src_gpu, dst_gpu, nbytes, latency, arrived, maestro, rail)
        return VirtualWork(self, arrived)

    def irecv(self, tensor, src, tag=0, label=None):
        actor = _m.current()
        self.cluster.maestro.sync(actor)
        key = (self.namespace, src, self.rank, tag)
        box = self.cluster.sends[key]
        done = _m.Activity(f"receive from rank {src}" + (f" ({label.collective})" if label else ""))
        work = VirtualWork(self, done, tensor)
        if box:
            self._match(work, box.popleft(), src)
        else:
            self.cluster.recvs[key].append(work)
        return work

    def wait_any(self, works: list[VirtualWork], timeout: float | None = None) -> int:
        """The index of the first of ``works`` to complete in virtual time (``RunsChannelsApart``; ties:
        the lowest index): one activity, done when the first of theirs is, is waited for."""
        if (i := _first_done(works)) >= 0:
            return i
        maestro, acts = self.cluster.maestro, [w.activity for w in works]
        first = _m.Activity(f"{acts[0].what} (or {len(acts) - 1} more)")
        for a in acts:
            a.then.append(lambda at: first.done_at is None and maestro.fire(first, at))
        maestro.wait(_m.current(), first)
        return _first_done(works)

    def _match(self, work: VirtualWork, letter: _Letter, src: int) -> None:
        """A receive meets the message from rank ``src``: done when the message has arrived (now, if it has)."""
        have = (letter.src if letter.src is not None else letter.data).numel()
        if have != work.tensor.numel():
            raise ValueError(
                f"rank {work.t.rank}: a message of {have} elements from rank {src} met a receive of "
                f"{work.tensor.numel()} elements (a send and its receive must have the same size)"
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

    def _call_starts(self, actor: _m.Actor, label: Label) -> None:
        """A call's first message on this actor (see the module): the one place a call's own pricing
        begins: the protocol NCCL picked for it (or the run's), and its base latency or NCCL's time."""
        price = actor.state["price"] = _tuning.Pricing(self.cluster, actor.state.pop("nccl", None))
        actor.clock += price.start

    def exchange(self, sends: list[Message], recvs: list[Message], label: Label):
        """A round's messages, each priced on its own (see the module); a new call pays the base latency.
        Each strand of the call's channels has a tag of its own (its rounds run apart, ``executor.py``)."""
        actor, free = _m.current(), _FREE in label.collective
        key, state = (self.namespace, label.collective, label.algorithm), actor.state
        if key != state.get("call"):
            state["call"], state["rounds"] = key, {}
        rounds = state["rounds"]
        if label.round <= rounds.get(label.strand, -1):  # a strand's rounds only go forward: a new call
            rounds.clear()
        if not free and not rounds:
            self._call_starts(actor, label)
        rounds[label.strand] = label.round
        price = None if free else state["price"]  # the protocol NCCL picked, or the run's
        # reductions not charged: the check's own combine, and a call priced at NCCL's own time
        # (NVLS, NVLSTree, CollNet: that time includes the switch's or the fabric's reduction)
        state["free"] = free or price.free
        tag = COLLECTIVE_TAG + label.strand
        recv_works = [self.irecv(m.tensor, m.peer, tag, label) for m in recvs]
        gpus, me, wire = self.gpus, self.gpus[self.rank], 1.0 if free else price.wire
        late = [
            -1.0 if free or price.free else price.step_latency(me, gpus[m.peer], m.channel) for m in sends
        ]
        send_works = [
            self.isend(m.tensor, m.peer, tag, label, t, m.channel, wire) for m, t in zip(sends, late)
        ]
        return send_works, recv_works


def _first_done(works: list[VirtualWork]) -> int:
    """The index of the first of ``works`` done in virtual time (ties: the lowest), -1 if none is."""
    done = [(w.activity.done_at, i) for i, w in enumerate(works) if w.activity.done_at is not None]
    return min(done)[1] if done else -1


_tuning.serves(VirtualTransport)  # NCCL's choice answers for this run's ranks (tuning.py)
