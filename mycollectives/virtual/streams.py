"""Communication streams: ``async_op=True`` collectives progress while the rank computes.

Each transport of a rank has a :class:`StreamLane` (the API asks the
transport for its lane, ``api/work.py``). A blocking collective runs at once
in the rank's own thread when the stream has nothing queued and has caught
up with the rank's clock; otherwise it, like every async collective, goes
to the stream: an actor with a clock of its own that runs the lane's calls
in order (FIFO), each starting no earlier than the rank posted it. The
rank's clock meanwhile goes on with compute; ``work.wait()`` joins the two:
the rank's clock becomes the later of its own and the call's end. That is
what a CUDA stream running NCCL kernels beside the compute stream does.

``torch.cuda.synchronize()`` waits for every stream of the device: in
virtual time, :func:`drain` moves the rank's clock to the end of the last
call each of its lanes was given (a stream's or an event's ``synchronize``
does not: as on a GPU, NCCL's streams are not the compute stream, and only
``work.wait()`` orders the two).

Every call a lane runs is also kept, with its flight-recorder entry (which
collective, its size, the algorithm chosen), in :func:`calls_of` the run's
cluster: what a trace of the run names (``trace.py``).
"""

from __future__ import annotations

import collections
import weakref

import torch

from .. import flight
from ..transport.lane import Work, settle
from . import maestro as _m
from .compute import collective

MAX_CALLS = 200_000  # calls kept per run (as transport.py keeps spans)
_calls: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def calls_of(cluster) -> list:
    """``[rank, lane, start, end, entry]`` of every call the lanes of ``cluster`` ran (``entry``: the
    flight recorder's, or None with the recorder off)."""
    return _calls.setdefault(cluster, [])


def _keep(cluster, record: list) -> None:
    calls = calls_of(cluster)
    if len(calls) < MAX_CALLS:
        calls.append(record)


def drain(actor: _m.Actor) -> None:
    """Block the rank ``actor`` until every call its lanes were given has ended; its clock moves there."""
    for lane in actor.state.get("lanes", ()):
        if lane.last is not None:
            actor.maestro.wait(actor, lane.last)


def _entry(transport):
    """The flight-recorder entry of the call being posted now (the API records it just before)."""
    if not flight.enabled():
        return None
    ring = flight.recorder(transport).ring
    return ring[-1] if ring else None


class StreamWork(Work):
    """What an async collective returns on the virtual cluster: ``wait()`` joins the stream in virtual time."""

    def __init__(self, outputs, activity: _m.Activity, maestro: _m.Maestro):
        super().__init__(outputs)
        self.activity, self._maestro = activity, maestro

    def wait(self, timeout=None) -> bool:
        self._maestro.wait(_m.current(), self.activity)
        if self._error is not None:
            raise self._error
        return True

    def is_completed(self) -> bool:
        return self._maestro.test(self.activity)

    def get_future(self) -> torch.futures.Future:
        """A future of the call's outputs whose ``wait()`` and ``value()`` join the stream in virtual time."""
        with self._lock:
            if self._future is None:
                self._future = _Future(self)
                if self._done.is_set():
                    settle(self._future, self._outputs, self._error)
            return self._future


class _Future(torch.futures.Future):
    """``torch.futures.Future`` whose waits are simcalls (a plain one would block the rank's thread for good)."""

    def __init__(self, work: StreamWork):
        super().__init__()
        self._work = work

    def wait(self):
        self._work._maestro.wait(_m.current(), self._work.activity)
        return super().wait()

    def value(self):
        self._work._maestro.wait(_m.current(), self._work.activity)
        return super().value()


class StreamLane:
    """The calls of one transport on one rank, in order (see the module)."""

    def __init__(self, transport):
        self.t, self.cluster = transport, transport.cluster
        self.queue: collections.deque = collections.deque()
        self.busy_until = 0.0  # virtual time the stream's last call ended
        self.pending = 0
        self.actor: _m.Actor | None = None
        self.charge = None
        self.avail: _m.Activity | None = None
        self.last: _m.Activity | None = None  # the end of the last call given to the stream (not its work:
        # that would keep its tensors alive); what synchronize waits for

    def run(self, job, async_op: bool, outputs=()):
        me = _m.current()
        maestro = self.cluster.maestro
        entry = _entry(self.t)
        if not async_op and self.pending == 0 and self.busy_until <= me.clock:
            start = me.clock
            with collective(me.state.get("charge"), me):  # its reductions are charged to this rank
                job()
            self.cluster.span(me.rank, "comm", start, me.clock)
            _keep(self.cluster, [me.rank, "comm", start, me.clock, entry])
            return None
        work = StreamWork(outputs, _m.Activity(f"see its stream finish a call (rank {me.rank})"), maestro)
        self.pending += 1
        self.queue.append((job, work, me.clock, entry))
        if self.last is None:
            me.state.setdefault("lanes", []).append(self)
        self.last = work.activity
        if self.actor is None:
            self.charge = me.state.get("charge")  # the rank's GPU, which runs the stream's reductions
            self.actor = maestro.spawn(
                self.cluster.new_id(), f"stream of rank {me.rank}", me.rank, self._serve, me.clock
            )
        elif self.avail is not None:
            avail, self.avail = self.avail, None
            self.actor.idle = False
            maestro.fire(avail, me.clock)
        if async_op:
            return work
        work.wait()
        return None

    def _serve(self, actor: _m.Actor) -> None:
        maestro = self.cluster.maestro
        while True:
            if not self.queue:
                actor.idle = True
                self.avail = _m.Activity("nothing (idle stream)")
                maestro.wait(actor, self.avail)
                actor.idle = False
            job, work, posted, entry = self.queue.popleft()
            actor.clock = max(actor.clock, posted)
            start, error = actor.clock, None
            try:
                with torch.no_grad(), collective(self.charge, actor):
                    job()
            except _m.Aborted:
                raise
            except BaseException as e:  # noqa: BLE001 - handed to whoever waits on the work
                error = e
            self.pending -= 1
            self.busy_until = actor.clock
            self.cluster.span(actor.rank, "stream", start, actor.clock)
            _keep(self.cluster, [actor.rank, "stream", start, actor.clock, entry])
            maestro.fire(work.activity, actor.clock)  # first: callbacks of its future may wait on it
            work.finish(error)
