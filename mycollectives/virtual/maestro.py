"""The scheduler of a virtual run: actors in virtual time, one at a time (SimGrid's *maestro*).

Every rank, and every rank's communication stream, is an *actor*: a thread
with a clock in virtual seconds. Only one actor runs at a time. It runs
until it makes a *simcall* (posts a message, waits, or reads its clock)
that needs the others; then the scheduler picks the next event: the actor
ready at the smallest time (ties by actor id), or the network's next flow
completion, whichever comes first. Threads are only the way to keep each
actor's Python stack; which one runs, and in what order, depends on virtual
time alone, so a run gives the same times and results bit for bit whatever
the machine's load (Casanova et al., ``casanova2014simgrid``).

Charging compute moves only the actor's own clock; the actor's next simcall
then waits until the scheduler reaches that time, so nothing it does is
seen by others before it happens.
"""

from __future__ import annotations

import heapq
import threading
import time

from ..transport.base import TransportDeadlock
from .threads import raise_in

_here = threading.local()
POLL = 1e-6  # virtual seconds one unsuccessful poll (is_completed) costs
STOP_GRACE = 30.0  # wall seconds an abandoned run waits for the actor in control to stop


class Aborted(BaseException):
    """Raised in an actor that must stop because the run is over (another rank failed)."""


class Activity:
    """Something actors can wait for: done at a virtual time, once."""

    __slots__ = ("done_at", "waiters", "what", "then")

    def __init__(self, what: str = ""):
        self.done_at: float | None = None
        self.waiters: list[Actor] = []
        self.what = what
        self.then: list = []  # callbacks, called with the time it is done


class Actor:
    """One thread of the run with its own virtual clock."""

    def __init__(self, maestro: Maestro, aid: int, name: str, rank: int, clock: float = 0.0):
        self.maestro, self.id, self.name, self.rank = maestro, aid, name, rank
        self.clock = clock
        self.go = threading.Lock()
        self.go.acquire()
        self.waiting: Activity | None = None
        self.error: BaseException | None = None  # raised in the actor when it resumes
        self.done = False
        self.idle = False  # a stream with nothing queued: not counted in a deadlock
        self.state: dict = {}  # per-actor state of the transport (round latencies of the current call)
        self.thread: threading.Thread | None = None


def current() -> Actor:
    """The actor running in this thread (raises outside a virtual run)."""
    actor = getattr(_here, "actor", None)
    if actor is None:
        raise RuntimeError("this needs a virtual run: call it inside a function given to virtual.run")
    return actor


def current_or_none() -> Actor | None:
    return getattr(_here, "actor", None)


class Maestro:
    """Runs actors one at a time in virtual time (see the module); ``net`` is the network."""

    def __init__(self, net, wall_timeout: float):
        self.net, self.wall_timeout = net, wall_timeout
        self.now = 0.0
        self.actors: list[Actor] = []
        self._ready: list[tuple[float, int, Actor]] = []
        self.failed: list[tuple[Actor, BaseException]] = []
        self.finished = threading.Event()
        self.switches = 0
        self.running: Actor | None = None  # the actor holding control (None before the start and at the end)
        self.stopping = False  # the run is abandoned (timeout, Ctrl-C): every actor is aborted

    def spawn(self, aid: int, name: str, rank: int, body, clock: float = 0.0, idle: bool = False) -> Actor:
        """A new actor running ``body(actor)`` in its own thread, ready at ``clock`` (or idle)."""
        actor = Actor(self, aid, name, rank, clock)
        actor.idle = idle
        actor.thread = threading.Thread(target=self._main, args=(actor, body), name=name, daemon=True)
        try:
            actor.thread.start()
        except RuntimeError as e:  # the system's limit on threads
            raise RuntimeError(
                f"virtual run: cannot start the thread of {name} ({e}) with {len(self.actors)} actors "
                "already running: the system's limit on threads; run fewer ranks"
            ) from None
        self.actors.append(actor)
        if not idle:
            self.ready(actor)
        return actor

    def _main(self, actor: Actor, body) -> None:
        try:
            actor.go.acquire()
            _here.actor = actor
            if actor.error is not None:
                raise actor.error
            body(actor)
        except Aborted:
            pass
        except BaseException as e:  # noqa: BLE001 - re-raised by run() with the rank named
            self.failed.append((actor, e))
        finally:
            _here.actor = None
            actor.done = True
            self._dispatch()

    def ready(self, actor: Actor) -> None:
        heapq.heappush(self._ready, (actor.clock, actor.id, actor))

    # --- simcalls (called by the running actor) --------------------------------

    def sync(self, actor: Actor) -> None:
        """Let the others catch up with ``actor``'s clock before it acts."""
        if actor.clock > self.now or (self._ready and self._ready[0][:2] < (actor.clock, actor.id)):
            self.ready(actor)
            self._switch(actor)

    def wait(self, actor: Actor, activity: Activity) -> None:
        """Block ``actor`` until ``activity`` is done; its clock then moves to that time."""
        if activity.done_at is None:
            self.sync(actor)
        if activity.done_at is None:
            activity.waiters.append(actor)
            actor.waiting = activity
            self._switch(actor)
            actor.waiting = None
        actor.clock = max(actor.clock, activity.done_at)  # the next simcall lets the others catch up

    def test(self, activity: Activity) -> bool:
        """Whether ``activity`` is done by the calling actor's clock. A poll that finds it not done
        costs ``POLL`` seconds and lets the others run, so a loop that polls lets virtual time pass
        (SMPI charges ``MPI_Test`` for the same reason)."""
        actor = current_or_none()
        if actor is None:
            return activity.done_at is not None
        if activity.done_at is not None and activity.done_at <= actor.clock:
            return True
        actor.clock += POLL
        self.sync(actor)
        return activity.done_at is not None and activity.done_at <= actor.clock

    def fire(self, activity: Activity, at: float) -> None:
        """``activity`` is done at virtual time ``at``: its waiters become ready."""
        activity.done_at = at
        for a in activity.waiters:
            a.clock = max(a.clock, at)
            a.waiting = None
            self.ready(a)
        activity.waiters.clear()
        for callback in activity.then:
            callback(at)
        activity.then.clear()

    def _switch(self, actor: Actor) -> None:
        """Hand the baton to the next actor and wait for ours to come back."""
        self._dispatch()
        actor.go.acquire()
        if actor.error is not None:
            err, actor.error = actor.error, None
            raise err

    # --- choosing the next event ------------------------------------------------

    def _dispatch(self) -> None:
        """Resume the next actor (the caller then blocks or ends), or finish the run."""
        self.switches += 1
        nxt = self._next()
        self.running = nxt
        if nxt is None:
            self.finished.set()
        else:
            nxt.go.release()

    def _next(self) -> Actor | None:
        while True:
            if self.failed or self.stopping:
                return self._abort_one()
            t_net = self.net.next_time()
            if self._ready and self._ready[0][0] <= t_net:
                clock, _, actor = heapq.heappop(self._ready)
                if actor.done:
                    continue
                if clock > self.now:
                    self.net.advance(clock, self)
                    self.now = clock
                return actor
            if t_net != float("inf"):
                self.net.advance(t_net, self)
                self.now = max(self.now, t_net)
                continue
            return self._stalled()

    def _stalled(self) -> Actor | None:
        """Nothing ready and nothing in flight: the end, or a deadlock."""
        blocked = [a for a in self.actors if not a.done and not a.idle]
        if not blocked:
            idle = [a for a in self.actors if not a.done]
            if not idle:
                return None
            idle[0].error = Aborted()  # streams with nothing to do: let them end
            return idle[0]
        waits = "; ".join(f"{a.name} waits to {a.waiting.what if a.waiting else '?'}" for a in blocked)
        gone = sorted({a.rank for a in self.actors if a.done and a.name.startswith("rank")})
        msg = f"deadlock at virtual time {self.now:.6g} s: {waits}" + (
            f" (rank(s) {', '.join(map(str, gone))} already returned)" if gone else ""
        )
        for a in blocked:
            a.error = TransportDeadlock(msg)
            self.ready(a)
        return heapq.heappop(self._ready)[2]

    def _abort_one(self) -> Actor | None:
        """A rank failed: stop the others one by one."""
        for a in self.actors:
            if not a.done and not isinstance(a.error, Aborted):
                a.error = Aborted()
                return a
        return None

    def start(self) -> None:
        """Resume the first actor from the run's thread, then wait for the run to finish. A run
        that outlives its wall-clock timeout, or is interrupted (Ctrl-C), is stopped (:meth:`halt`)."""
        deadline = time.monotonic() + self.wall_timeout
        try:
            self._dispatch()
            while not self.finished.wait(0.25):
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"virtual run still going after {self.wall_timeout:g} s of wall time (virtual time "
                        f"{self.now:.6g} s; in control: {self._holder()}; an endless loop, or a wait outside "
                        "mycollectives?)"
                    )
        except TimeoutError as e:
            self.halt(e)
            raise
        except BaseException as e:  # Ctrl-C
            e.add_note(
                f"(virtual run stopped at virtual time {self.now:.6g} s; in control: {self._holder()})"
            )
            self.halt(e)
            raise
        self._join(time.monotonic() + STOP_GRACE)

    def _holder(self) -> str:
        return self.running.name if self.running is not None else "none (the run had not started)"

    def halt(self, why: BaseException, grace: float | None = None) -> None:
        """Stop every actor of an abandoned run and wait for their threads to end: one in control that
        makes no progress gets :class:`Aborted` raised in its thread at its next Python instruction
        (after a ``time.sleep`` returns); the others stop one at a time, as after a failure. One still
        in control after ``grace`` s (:data:`STOP_GRACE`) is left behind, named in a note on ``why``."""
        self.stopping = True
        deadline = time.monotonic() + (STOP_GRACE if grace is None else grace)
        if self.running is None and not self.finished.is_set():  # nothing started yet
            self._dispatch()
        hit, seen = None, -1
        while not self.finished.wait(0.05):
            holder, progress = self.running, self.switches != seen
            seen = self.switches
            if progress:  # the grace counts from the last hand-over: a long abort chain is no stuck actor
                deadline = time.monotonic() + (STOP_GRACE if grace is None else grace)
            if holder is not None and not holder.thread.is_alive():
                holder.done = True
                self._dispatch()  # it ended while handing control over: hand it over from here
            elif holder is not None and holder is not hit and not progress:  # stuck in its own code
                hit = holder
                raise_in(holder.thread, Aborted)
            elif time.monotonic() > deadline:
                break
        stuck = self.running if not self.finished.is_set() else None
        if stuck is not None:  # blocked for good: stop the others without it
            stuck.done = True
            self._dispatch()
        self._join(time.monotonic() + 60.0, stuck)  # every thread is past its last simcall: they end
        if stuck is not None:
            why.add_note(f"({stuck.name} did not stop, blocked outside Python; its thread is left running)")

    def _join(self, deadline: float, skip: Actor | None = None) -> None:
        """Wait until ``deadline`` for every actor's thread (but ``skip``'s) to end."""
        for a in self.actors:
            if a is not skip:
                a.thread.join(max(0.0, deadline - time.monotonic()))
