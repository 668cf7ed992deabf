"""The flight recorder: every rank's last collectives, per group, dumped when one fails (chapter 6).

Every transport (one group's communicator on one rank) keeps a ring of its
last ``MYCOLLECTIVES_FLIGHT_SIZE`` calls (2000 by default, 0 turns the
recorder off), in the order this rank issued them: the sequence number, the
collective, its algorithm, sizes and dtype, where the program called it, and
its state as it moves along::

    posted -> running (argument check, then round r of n, waiting on peer q) -> completed | failed

The package's hot path touches it in a few places only:

* ``api/core.py``: :func:`posted` when a collective is called, :func:`track`
  around the job that runs it (on the caller's thread, or on the group's
  worker thread for ``async_op=True``);
* ``executor.py`` and ``loadstore.py``: :func:`current` once per schedule,
  then plain attribute writes (``round``, ``peer``) per round and per wait;
* ``api/p2p.py``: :func:`p2p` per send or receive, :func:`done` and
  :func:`fail` when it is waited on.

A call that fails (:class:`~mycollectives.CollectiveTimeout`,
:class:`~mycollectives.PeerError`, :class:`~mycollectives.DeadlockError`, or
ranks that disagree on their arguments) writes every rank of this process to
``MYCOLLECTIVES_FLIGHT_DIR`` (:mod:`.files`, one JSON file per rank) and its
error message names the files and the command that reads them all:
``python -m mycollectives.doctor DIR``. ``mycollectives.flight.dump()`` and
``SIGUSR1`` write them on demand.
"""

from __future__ import annotations

import collections
import os
import sys
import threading
import time
from pathlib import Path

from .ident import describe, job_id  # noqa: F401 (job_id: part of the API)
from .registry import add, recorders
from .site import site as _site

ENV_SIZE = "MYCOLLECTIVES_FLIGHT_SIZE"
DEFAULT_SIZE = 2000


POSTED, RUNNING, WAITING, COMPLETED, FAILED = "posted", "running", "waiting", "completed", "failed"


class Entry:
    """One call as the recorder keeps it; the executor writes ``round`` and ``peer`` as it goes.

    ``call`` is ``(kind, fn, algorithm asked for, dtype, count, root or peer, op)``;
    the other attributes are set when they happen (unset ones read as absent).
    """

    __slots__ = (
        "seq",
        "call",
        "site",
        "state",
        "t_posted",
        "algorithm",
        "phase",
        "round",
        "rounds",
        "peer",
        "what",
        "t_started",
        "t_done",
        "error",
    )

    def __init__(self, seq: int, call: tuple, site):
        self.seq, self.call, self.site, self.state, self.t_posted = seq, call, site, POSTED, time.time()

    def enter(self, algorithm: str, rounds: int, label: str) -> None:
        """A schedule starts: the argument check's, or the call's own."""
        if label.endswith("(argument check)"):
            self.phase = "argument check"
        else:
            self.phase, self.algorithm = "schedule", algorithm
        self.rounds, self.round = rounds, -1


#: The entry that schedules run outside a call write to (no rank's record keeps it).
NOBODY = Entry(-1, ("none", "", "", None, None, None, None), None)


class Recorder:
    """One transport's ring of entries, with what the dumps need to name the group."""

    def __init__(self, transport, size: int):
        self.ring: collections.deque[Entry] = collections.deque(maxlen=size)
        self.seq = self.p2p_seq = -1
        self.size, self.group_rank = transport.world_size, transport.rank
        self.job, self.owner, self.name, self.ranks = describe(transport)
        self.kind = type(transport).__name__
        self.failure: dict | None = None  # the last call of this group that failed on this rank


def _env_size() -> int:
    """``MYCOLLECTIVES_FLIGHT_SIZE``: a count from 0 up; anything else is warned
    about and the default used (a typo must not stop ``import mycollectives``)."""
    raw = os.environ.get(ENV_SIZE, "").strip()
    if not raw:
        return DEFAULT_SIZE if ENV_SIZE not in os.environ else 0
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        import warnings

        warnings.warn(
            f"{ENV_SIZE}={raw!r}: expected a count of entries from 0 up (0: off); using {DEFAULT_SIZE}",
            stacklevel=2,
        )
        return DEFAULT_SIZE
    return value


_size = _env_size()


class _Here(threading.local):
    entry: Entry = NOBODY


_here = _Here()


def enabled() -> bool:
    return _size > 0


def set_size(size: int) -> int:
    """Entries kept per group from now on (0: off, as ``MYCOLLECTIVES_FLIGHT_SIZE=0``); returns the old size.

    Groups already recording keep their rings; the benchmark
    ``benchmarks/flight_overhead.py`` turns the recorder off and on this way.
    """
    global _size
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise ValueError(f"flight recorder size must be an int >= 0, got {size!r}")
    old, _size = _size, size
    return old


def recorder(transport) -> Recorder:
    """The recorder of ``transport`` (made on first use)."""
    rec, new = add(transport, lambda: Recorder(transport, max(_size, 1)))
    if new and not transport.local:
        from .files import arm

        arm()
    return rec


def posted(transport, fn: str, algorithm: str, meta) -> Entry | None:
    """Record a collective this rank has just called (``meta`` None: its arguments were bad)."""
    if not _size:
        return None
    rec = transport.flight_recorder or recorder(transport)
    rec.seq += 1
    if meta is None:
        e = Entry(rec.seq, ("collective", fn, algorithm, None, None, None, None), _site(fn))
    else:
        e = Entry(
            rec.seq, ("collective", fn, algorithm, meta.dtype, meta.count, meta.root, meta.op), _site(fn)
        )
    rec.ring.append(e)
    return e


def p2p(transport, fn: str, peer: int, tensor) -> Entry | None:
    """Record a point-to-point ``send`` or ``recv`` with ``peer``; they have numbers of their own."""
    if not _size:
        return None
    rec = recorder(transport)
    rec.p2p_seq += 1
    e = Entry(rec.p2p_seq, ("p2p", fn, "", tensor.dtype, tensor.numel(), peer, None), _site(fn))
    e.peer = peer
    rec.ring.append(e)
    return e


def track(entry: Entry | None, job):
    """``job`` wrapped so that ``entry`` follows it: running, then completed or failed (and dumped)."""
    if entry is None:
        return job

    def run() -> None:
        entry.state, entry.t_started = RUNNING, time.time()
        _here.entry = entry
        try:
            job()
        except BaseException as err:
            _here.entry = NOBODY
            fail(entry, err)
            raise
        _here.entry = NOBODY
        entry.state, entry.t_done, entry.peer = COMPLETED, time.time(), None

    return run


def current() -> Entry:
    """The entry of the call running on this thread (:data:`NOBODY` outside one)."""
    return _here.entry


def waiting(entry: Entry | None) -> None:
    """A point-to-point call is being waited on."""
    if entry is not None:
        entry.state = WAITING
        if getattr(entry, "t_started", None) is None:
            entry.t_started = time.time()


def done(entry: Entry | None) -> None:
    """Mark ``entry`` completed (a point-to-point call, when it is waited on)."""
    if entry is not None:
        entry.state, entry.t_done = COMPLETED, time.time()


def fail(entry: Entry | None, err: BaseException) -> BaseException:
    """Mark ``entry`` failed, dump this process's ranks, and name the dump in ``err``'s message."""
    if entry is not None and entry is not NOBODY:
        entry.state, entry.t_done = FAILED, time.time()
        entry.error = f"{type(err).__name__}: {err}"[:400]
    if _worth_a_dump(err):
        from .files import annotate, dump

        rec = _owner_of(entry)
        if rec is not None:
            rec.failure = dict(reason=_reason(err), seq=entry.seq, kind=entry.call[0], error=entry.error)
        try:
            where = dump(reason=_reason(err), job=rec.job if rec else None)
        except OSError as e:  # a full or read-only disk must not hide the collective's own error
            where = None
            print(f"mycollectives: could not write the flight record: {e}", file=sys.stderr)
        if where is not None:
            annotate(err, where)
    return err


def _worth_a_dump(err: BaseException) -> bool:
    from ..errors import CollectiveError

    return isinstance(err, (CollectiveError, ValueError, TypeError, KeyboardInterrupt))


def _reason(err: BaseException) -> str:
    from ..errors import CollectiveTimeout, DeadlockError, PeerError

    for kind, why in ((DeadlockError, "deadlock"), (CollectiveTimeout, "timeout"), (PeerError, "peer error")):
        if isinstance(err, kind):
            return why
    return "interrupted" if isinstance(err, KeyboardInterrupt) else "argument error"


def _owner_of(entry: Entry | None) -> Recorder | None:
    for rec in recorders():
        if entry is not None and any(e is entry for e in reversed(rec.ring)):
            return rec
    return None


def dump(directory: str | os.PathLike | None = None, reason: str = "request") -> Path:
    """Write every rank of this process to ``directory`` (default: see :func:`.files.flight_dir`) now."""
    from .files import dump as _dump

    return _dump(reason=reason, directory=directory)


def snapshot(transport) -> list[dict]:
    """``transport``'s entries as the dump writes them, oldest first (chapter 6 prints them)."""
    from .files import entry_dict

    return [entry_dict(e) for e in list(recorder(transport).ring)]


if _size and os.environ.get("TORCHELASTIC_RUN_ID"):  # under torchrun: a rank stopped before its first
    from .files import arm  # collective still writes where it was (SIGTERM), as a record with no calls

    arm()
