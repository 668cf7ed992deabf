"""Writing the flight recorder to disk: one JSON file per rank (chapter 6).

``DIR/rank{R}.json`` holds rank ``R``'s groups, each with its entries oldest
first, and the state of the process when it was written: why (a failure,
``SIGUSR1``, ``SIGTERM``, exit, a call), where its main thread was, and the
error a failed call raised. ``DIR`` is ``MYCOLLECTIVES_FLIGHT_DIR``, or
``<tmp>/mycollectives-flight/<job>`` when that is unset (the error message of
a failed call names it). :mod:`mycollectives.doctor` reads the files of all
ranks and says what went wrong.

When a process runs under ``torchrun`` (or with ``MYCOLLECTIVES_FLIGHT_DIR``
set) its ranks are also written when they exit, and on ``SIGTERM`` (which
``torchrun`` sends the others when one rank fails), so that the ranks that
did not fail say where they were: a straggler still computing, a rank that
went past a collective the others wait in. A process that is killed
(``SIGKILL``, ``os._exit``) writes nothing: that absence is how the doctor
tells a rank that died. A rank stopped or crashing before its first
collective writes a record with no calls (the package arms its handlers on
import under ``torchrun``), so that it is not taken for dead. Signal handlers run in the main thread between
Python bytecodes, so a rank blocked inside native code writes its record
when that code returns; one that dies there (an ``abort()``) leaves
``rank{R}.native`` instead (:mod:`mycollectives.flight.native`).
"""

from __future__ import annotations

import atexit
import json
import os
import re
import signal
import socket
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

from .ident import job_id
from .native import arm_native
from .registry import recorders

ENV_DIR = "MYCOLLECTIVES_FLIGHT_DIR"
ENV_SIGNALS = "MYCOLLECTIVES_FLIGHT_SIGNALS"  # "0": install no signal handler
VERSION = 2  # 2: ``run`` and ``started``, which tell apart two runs of one job id in one directory
_STARTED = time.time()  # about when this process started (the package is imported early)
_lock = threading.RLock()
_armed = False
_exit_error: str | None = None
_exit_stack: list[list] | None = None  # where the uncaught exception was raised, innermost frame first


def flight_dir(job: str | None = None) -> Path:
    """``MYCOLLECTIVES_FLIGHT_DIR``, or a directory of this job under the system's temporary directory
    (one for all local worlds: each run's files replace the last's)."""
    env = os.environ.get(ENV_DIR)
    if env:
        return Path(env)
    job = job or job_id()
    name = "local" if job.startswith("local-") else re.sub(r"[^A-Za-z0-9_.-]", "_", job)
    return Path(tempfile.gettempdir()) / "mycollectives-flight" / name


def run_id() -> str:
    """What tells this run from another of the same job id (``--rdzv-id $SLURM_JOB_ID`` twice): the
    world size and the launcher's restart count; runs alike in both are told apart by ``started``."""
    world = os.environ.get("WORLD_SIZE", "?")
    return f"world{world}-restart{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}"


def entry_dict(e) -> dict:
    """One entry as plain data."""
    kind, fn, asked, dtype, count, root, op = e.call
    site = func = None
    if e.site is not None:
        code, lasti = e.site
        site, func = f"{code.co_filename}:{line_of(code, lasti)}", code.co_name

    def get(name, default=None):
        return getattr(e, name, default)

    return dict(
        seq=e.seq,
        kind=kind,
        fn=fn,
        algorithm=get("algorithm", asked),
        dtype=None if dtype is None else str(dtype).removeprefix("torch."),
        count=count,
        root=root,
        op=None if op is None else getattr(op, "name", str(op)),
        site=site,
        function=func,
        state=e.state,
        phase=get("phase", ""),
        round=get("round", -1),
        rounds=get("rounds", 0),
        peer=get("peer"),
        what=get("what"),
        t_posted=e.t_posted,
        t_started=get("t_started"),
        t_done=get("t_done"),
        error=get("error"),
    )


def line_of(code, lasti: int) -> int | None:
    """The source line of the instruction at byte offset ``lasti`` of ``code``."""
    line = None
    for start, end, ln in code.co_lines():
        if ln is not None and start <= lasti < end:
            return ln
        line = ln if ln is not None else line
    return line


def _main_stack(limit: int = 40) -> list[list]:
    """The main thread's frames, innermost first: ``[file, line, function]``."""
    frame = sys._current_frames().get(threading.main_thread().ident)
    out = []
    while frame is not None and len(out) < limit:
        out.append([frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name])
        frame = frame.f_back
    return out


def dump(
    reason: str = "request",
    directory: str | os.PathLike | None = None,
    job: str | None = None,
) -> Path | None:
    """Write one file per rank of this process (only ``job``'s ranks if given); the directory, or None.

    Where several jobs of this process would write to one directory (local
    worlds that ran one after another), only the one that ran last does.
    """
    with _lock:
        owners = _writers(directory, job)
        where, now = None, time.time()
        if not owners and _before_first_call(reason):
            owners = {(job or job_id(), int(os.environ["RANK"])): []}
        for (j, owner), recs in sorted(owners.items()):
            local = bool(recs) and all(r.kind == "LocalTransport" for r in recs)
            doc = dict(
                version=VERSION,
                job=j,
                run=None if local else run_id(),
                started=_STARTED,
                rank=owner,
                host=socket.gethostname(),
                pid=os.getpid(),
                reason="exit" if recs and all(r.returned for r in recs) else reason,
                time=now,
                exit_error=_exit_error,
                exit_stack=_exit_stack,
                stack=None if local else _main_stack(),
                groups=[
                    dict(
                        name=r.name,
                        ranks=r.ranks,
                        rank=r.group_rank,
                        size=r.size,
                        transport=r.kind,
                        failure=getattr(r, "failure", None),
                        entries=[entry_dict(e) for e in list(r.ring)],
                    )
                    for r in recs
                ],
            )
            d = Path(directory) if directory is not None else flight_dir(j)
            d.mkdir(parents=True, exist_ok=True)
            tmp = d / f".rank{owner}.{os.getpid()}.{threading.get_ident()}.tmp"
            tmp.write_text(json.dumps(doc))
            os.replace(tmp, d / f"rank{owner}.json")
            where = d
        return where


def _writers(directory, job: str | None) -> dict[tuple[str, int], list]:
    """(job, rank) -> its recorders, for the jobs that write: per directory, the one that ran last."""
    owners: dict[tuple[str, int], list] = {}
    for rec in recorders():
        if job is None or rec.job == job:
            owners.setdefault((rec.job, rec.owner), []).append(rec)
    newest: dict[Path, tuple[float, str]] = {}
    for (j, _), recs in owners.items():
        d = Path(directory) if directory is not None else flight_dir(j)
        last = max((r.ring[-1].t_posted for r in recs if r.ring), default=0.0)
        if d not in newest or last > newest[d][0]:
            newest[d] = (last, j)
    keep = {j for _, j in newest.values()}
    return {k: v for k, v in owners.items() if k[0] in keep}


def _before_first_call(reason: str) -> bool:
    """A launched rank stopped or crashing before its first collective still says where it was."""
    launched = bool(os.environ.get("TORCHELASTIC_RUN_ID") or os.environ.get(ENV_DIR))
    return launched and os.environ.get("RANK", "").isdigit() and (reason != "exit" or _exit_error is not None)


def annotate(err: BaseException, where: Path) -> None:
    """Add where the flight record is, and how to read it, to ``err``'s message (once)."""
    if not err.args or not isinstance(err.args[0], str) or "mycollectives.doctor" in err.args[0]:
        return
    note = f"\n  flight record: {where}\n  diagnose every rank: python -m mycollectives.doctor {where}"
    err.args = (err.args[0] + note, *err.args[1:])


def arm() -> None:
    """Dump on ``SIGUSR1``; under torchrun (or with the directory set) also on ``SIGTERM`` and at exit.

    Called on the first call on a process group's transport. Handlers go only
    where none is installed (the default action), and only from the main thread.
    """
    global _armed
    if _armed or threading.current_thread() is not threading.main_thread():
        return
    _armed = True
    launched = bool(os.environ.get("TORCHELASTIC_RUN_ID") or os.environ.get(ENV_DIR))
    if os.environ.get(ENV_SIGNALS, "1") != "0":
        _install(signal.SIGUSR1, _on_usr1)
        if launched:
            _install(signal.SIGTERM, _on_term)
    if launched:
        atexit.register(_at_exit)
        _hook_excepthook()
        arm_native(flight_dir())  # a death in native code leaves rank{R}.native (.native)


_previous: dict[int, object] = {}


def _install(sig: int, handler) -> None:
    """``handler`` for ``sig`` where the action is the default, or where it is the package's own
    (the shared-memory transport's SIGTERM clean-up, which ``handler`` then calls)."""
    try:
        current = signal.getsignal(sig)
        if current == signal.SIG_DFL or getattr(current, "__module__", "").startswith("mycollectives."):
            _previous[sig] = current
            signal.signal(sig, handler)
    except (ValueError, OSError):  # not the main thread of the main interpreter
        pass


def _on_usr1(signum, frame) -> None:
    _quietly("SIGUSR1")


def _on_term(signum, frame) -> None:
    """Dump, then end as SIGTERM would (after the clean-up handler this one replaced, if any)."""
    _quietly("SIGTERM")
    previous = _previous.get(signal.SIGTERM)
    if callable(previous):
        previous(signum, frame)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def _at_exit() -> None:
    _quietly("exit")


def _quietly(reason: str) -> None:
    try:
        dump(reason=reason)
    except Exception as e:  # noqa: BLE001 - a handler must not raise
        print(f"mycollectives: could not write the flight record ({reason}): {e}", file=sys.stderr)


def _hook_excepthook() -> None:
    """Remember an uncaught exception, so that the exit dump says the rank crashed and where."""
    previous = sys.excepthook

    def hook(kind, value, tb):
        global _exit_error, _exit_stack
        frames = traceback.extract_tb(tb) if tb is not None else []
        where = frames[-1] if frames else None
        at = f" at {Path(where.filename).name}:{where.lineno} in {where.name}()" if where else ""
        message = str(value).split("\n  flight record:")[0]  # not the note that points here
        _exit_error = f"{kind.__name__}: {message}"[:400] + at
        _exit_stack = [[f.filename, f.lineno, f.name] for f in reversed(frames[-40:])]
        previous(kind, value, tb)

    sys.excepthook = hook
