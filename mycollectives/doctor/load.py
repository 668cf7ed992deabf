"""Reading every rank's flight record: the package's ``rank{R}.json`` (:mod:`mycollectives.flight.files`)
or PyTorch's Flight Recorder dumps (``torchfr``). A directory may hold files of several runs, even of
one job id: ``runs`` splits them and the latest is read, the rest reported as ignored. Given the parent
of per-job directories (the default ``<tmp>/mycollectives-flight``), the newest job directory is read.
"""

from __future__ import annotations

import gc
import json
from pathlib import Path

from . import native, torchfr
from .model import ENTRY, Dump, Group  # noqa: F401 (re-exported: the doctor's model)

UNREADABLE = "unreadable"  # the reason of a rank whose file could not be read
OTHER_JOB = "another job's file"  # the reason of a rank whose file holds another job's record
NATIVE = native.NATIVE  # the reason of a rank that died in native code, known from its rank{R}.native
UNKNOWN = {UNREADABLE, OTHER_JOB, NATIVE}  # no record of this run: neither died nor present


NUMBER = (int, float)
_SCALARS = {str, int, float, bool, type(None)}
_TIMES = {int, float, type(None)}


def _check(e: dict) -> dict:
    """An entry with every field of :data:`ENTRY`; ``ValueError`` naming a field of the wrong type.
    (Type checks on the whole entry at once: a dump may hold 100,000 entries per rank.)"""
    e = {**ENTRY, **e}
    if not _SCALARS.issuperset(map(type, e.values())):
        name, value = next((n, v) for n, v in e.items() if type(v) not in _SCALARS)
        raise ValueError(f"entry field {name!r} is a {type(value).__name__} ({str(value)[:40]})")
    if type(e["seq"]) is not int:
        raise ValueError(f"entry field 'seq' is {e['seq']!r}, not an integer")
    t = e["t_posted"]
    if (
        type(t) not in (int, float)
        or t != t
        or type(e["t_started"]) not in _TIMES
        or type(e["t_done"]) not in _TIMES
    ):
        bad_t = type(t) not in (int, float) or t != t
        name = "t_posted" if bad_t else next(n for n in ("t_started", "t_done") if type(e[n]) not in _TIMES)
        raise ValueError(f"entry seq {e['seq']}: {name!r} is {e[name]!r}, not a time in seconds")
    if type(e["site"]) is not str and e["site"] is not None:  # the one field read as text (the others print)
        e["site"] = str(e["site"])
    return e


def _stack(x, what: str) -> list | None:
    """A stack as ``[[file, line, function], ...]``, or None; ``ValueError`` if it is something else."""
    if x is None:
        return None
    if not isinstance(x, list) or not all(
        isinstance(f, list) and len(f) == 3 and isinstance(f[0], str) for f in x
    ):
        raise ValueError(f"{what!r} is not a list of [file, line, function]")
    return x


def _int(x, what: str) -> int:
    if isinstance(x, bool) or not isinstance(x, int) or x < 0:
        raise ValueError(f"{what} is {x!r}, not a rank (an integer >= 0)")
    return x


def _group(g) -> Group:
    if not isinstance(g, dict):
        raise ValueError(f"a group is a {type(g).__name__}, not an object")
    if not isinstance(g.get("ranks"), list):
        raise ValueError(f"group {str(g.get('name'))[:40]!r}: 'ranks' is {g.get('ranks')!r}, not a list")
    ranks = tuple(_int(r, "one of a group's 'ranks'") for r in g["ranks"])
    if "name" not in g:
        raise ValueError("a group without a name")
    group = Group(str(g["name"]), ranks, _int(g.get("rank"), "a group's 'rank'"), None)
    failure = g.get("failure")
    group.failure = failure if isinstance(failure, dict) else None
    entries = g.get("entries") or []
    if not isinstance(entries, list):
        raise ValueError(f"group {group.name!r}: 'entries' is not a list")
    for e in entries:
        if not isinstance(e, dict):
            continue
        e = _check(e)
        if e["kind"] == "p2p":
            group.p2p.append(e)
        else:
            group.collectives[e["seq"]] = e
    return group


def _read(path: Path) -> Dump:
    """Rank ``R``'s file; raises ``ValueError`` saying what is wrong with it."""
    if torchfr.is_dump(path):
        return torchfr.read(path)
    try:
        doc = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise ValueError(f"{type(e).__name__}: {e}") from e
    if not isinstance(doc, dict) or "rank" not in doc:
        raise ValueError("not a flight record (no rank)")
    rank = _int(doc["rank"], "'rank'")
    if not isinstance(doc.get("groups") or [], list):
        raise ValueError(f"'groups' is a {type(doc['groups']).__name__}, not a list")
    groups = {}
    for g in doc.get("groups") or []:
        group = _group(g)
        groups[group.key] = group
    t = doc.get("time") or 0.0
    if isinstance(t, bool) or not isinstance(t, NUMBER):
        raise ValueError(f"'time' is {t!r}, not a time in seconds")
    exit_error = doc.get("exit_error")
    return Dump(
        rank=rank,
        job=str(doc.get("job", "?")),
        host=str(doc.get("host", "?")),
        reason=str(doc.get("reason", "?")),
        time=t,
        stack=_stack(doc.get("stack"), "stack"),
        exit_error=None if exit_error is None else str(exit_error),
        groups=groups,
        path=path,
        exit_stack=_stack(doc.get("exit_stack"), "exit_stack"),
        run=None if doc.get("run") is None else str(doc.get("run")),
        started=doc.get("started") if isinstance(doc.get("started"), NUMBER) else None,
    )


def _files(directory: Path) -> list[Path]:
    files = sorted(p for p in directory.iterdir() if _ours(p) or torchfr.is_dump(p))
    if files:
        return files
    subdirs = [d for d in directory.iterdir() if d.is_dir() and any(map(_ours, d.iterdir()))]
    if not subdirs:
        return []
    newest = max(subdirs, key=lambda d: max(f.stat().st_mtime for f in d.iterdir() if _ours(f)))
    return sorted(p for p in newest.iterdir() if _ours(p) or torchfr.is_dump(p))


def _ours(p: Path) -> bool:
    return p.name.startswith("rank") and p.name.endswith(".json") and p.is_file()


def _latest(d: Dump) -> float:
    """When this rank last did something: its newest call, else when it was written."""
    times = [e["t_posted"] for g in d.groups.values() for e in [*g.collectives.values(), *g.p2p]]
    return max(times, default=d.time)


def _world(d: Dump) -> int:
    """How many ranks the run had, as this rank's largest group says."""
    return max((len(g.ranks) for g in d.groups.values()), default=0)


def _start(d: Dump) -> float:
    if d.started is not None:
        return d.started
    times = [e["t_posted"] for g in d.groups.values() for e in [*g.collectives.values(), *g.p2p]]
    return min(times, default=d.time)


def runs(dumps: list[Dump]) -> list[list[Dump]]:
    """The dumps split into runs, oldest first: by job, run id and world size, then in time (the files
    of one job id written by runs one after another: a process that started after every file of a run
    was written belongs to a later run)."""
    keyed: dict[tuple, list[Dump]] = {}
    for d in dumps:
        if d.groups:
            keyed.setdefault((d.job, d.run, _world(d)), []).append(d)
    out = []
    for same in keyed.values():
        same.sort(key=_start)
        run = [same[0]]
        for d in same[1:]:
            if d.rank in {x.rank for x in run} or _start(d) > max(max(x.time, _latest(x)) for x in run):
                out.append(run)
                run = [d]
            else:
                run.append(d)
        out.append(run)
    out.sort(key=lambda r: max(_latest(d) for d in r))
    for d in (d for d in dumps if not d.groups):  # stopped before its first call: the job's latest run
        run = next(
            (r for r in reversed(out) if r[0].job == d.job and d.rank not in {x.rank for x in r}), None
        )
        run.append(d) if run is not None else out.append([d])
    return out


def load(directory: str | Path) -> tuple[dict[int, Dump], list[str]]:
    """The newest run's dumps by rank, and notes about what was skipped."""
    dumps, notes, _ = load_jobs(directory)
    return dumps, notes


def load_jobs(directory: str | Path) -> tuple[dict[int, Dump], list[str], list[dict[int, Dump]]]:
    """:func:`load`'s answer, and the latest run of every *other job* whose files lie here (another
    job id or world size: dumps of two jobs handed over together), each to be read apart. A rank of
    the newest run whose file holds another job's record is :data:`OTHER_JOB`, not absent: what it
    did in this run is unknown (its file was overwritten), which is not the same as leaving none."""
    directory = Path(directory)
    if not directory.is_dir():
        raise FileNotFoundError(f"{directory} is not a directory of flight records")
    dumps, notes, bad = _read_all(directory)
    if not dumps:
        what = "flight records (rank*.json, or PyTorch Flight Recorder dumps)"
        return {}, [f"no {'readable ' if notes else ''}{what} in {directory}", *notes], []
    every = runs(dumps)
    latest = every[-1]
    if len(every) > 1:
        old = every[:-1]
        shown = "; ".join(f"job {r[0].job}, {_world(r[0])} ranks, {len(r)} file(s)" for r in old)
        notes.append(
            f"read the latest run (job {latest[0].job}, {_world(latest[0])} ranks, {len(latest)} file(s)); "
            f"ignored {len(old)} older run(s) in this directory: {shown}"
        )
    out = {d.rank: d for d in latest}
    for path in bad:  # a rank whose file is unreadable is not a rank that left none
        r = torchfr.rank_of(path) if torchfr.is_dump(path) else path.stem.removeprefix("rank")
        r = int(r) if isinstance(r, int) or (isinstance(r, str) and r.isdigit()) else None
        if r is not None and r not in out and r < max(_world(latest[0]), 1):
            out[r] = Dump(r, latest[0].job, "?", UNREADABLE, 0.0, None, None, {}, path)
    since = min(map(_start, latest))
    native.placeholders(latest[0].path.parent, out, max(_world(latest[0]), 1), since)
    others = _other_jobs(every, latest)
    jobs = [out, *others]
    for mine in jobs:  # a rank whose file another job's record took: unknown here, not absent
        job, world = next(iter(mine.values())).job, max(map(_world, mine.values()))
        for d in (d for theirs in jobs if theirs is not mine for d in theirs.values()):
            if d.rank not in mine and d.rank < world and d.reason not in UNKNOWN:
                mine[d.rank] = Dump(d.rank, job, "?", OTHER_JOB, 0.0, None, None, {}, d.path)
    return out, notes, others


def _read_all(directory: Path) -> tuple[list[Dump], list[str], list[Path]]:
    dumps, notes, bad = [], [], []
    collecting = gc.isenabled()
    gc.disable()  # millions of small objects, none cyclic: the collector would walk them again and again
    try:
        for path in _files(directory):
            try:
                dumps.append(_read(path))
            except ValueError as e:
                notes.append(f"could not read {path.name}: {str(e)[:160]}")
                bad.append(path)
    finally:
        if collecting:
            gc.enable()
    return dumps, notes, bad


def _other_jobs(every: list[list[Dump]], latest: list[Dump]) -> list[dict[int, Dump]]:
    """The latest run of each job other than ``latest``'s (by job id and world size; a run of the
    same job and size is an earlier attempt of it, as a restart leaves), oldest first."""

    def job(run: list[Dump]) -> tuple[str, int]:
        return run[0].job, _world(run[0])

    newest = {job(run): run for run in every if run[0].groups}  # runs are oldest first
    newest.pop(job(latest), None)
    return [{d.rank: d for d in run} for run in newest.values()]
