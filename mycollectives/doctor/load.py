"""Reading every rank's flight record (``rank{R}.json``, written by :mod:`mycollectives.flight.files`).

A directory may hold files of several jobs (a rank file is overwritten by
the next run with that rank, but a run with fewer ranks leaves the others):
the newest job is read, and the rest are reported as ignored. Given the
parent of per-job directories (the default ``<tmp>/mycollectives-flight``),
the newest job directory is read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

UNREADABLE = "unreadable"  # the reason of a rank whose file could not be read


@dataclass
class Group:
    """One group as one rank recorded it."""

    name: str
    ranks: tuple[int, ...]  # the group's ranks, as the job numbers them
    rank: int  # this rank in the group
    failure: dict | None
    collectives: dict[int, dict] = field(default_factory=dict)  # seq -> entry
    p2p: list[dict] = field(default_factory=list)

    @property
    def key(self) -> tuple[str, tuple[int, ...]]:
        return self.name, self.ranks

    def last(self) -> dict | None:
        """The latest collective entry."""
        return self.collectives[max(self.collectives)] if self.collectives else None


@dataclass
class Dump:
    """One rank's file."""

    rank: int
    job: str
    host: str
    reason: str  # why it was written: a failure, SIGTERM, SIGUSR1, exit, request
    time: float
    stack: list | None  # the main thread's frames, innermost first
    exit_error: str | None  # an uncaught exception the process exited with
    groups: dict[tuple, Group]
    path: Path
    exit_stack: list | None = None  # where the uncaught exception was raised, innermost first

    def blocked(self) -> tuple[Group, dict] | None:
        """The call this rank is (or was, when it failed) waiting in: (group, entry), or None."""
        best = None
        for g in self.groups.values():
            for e in [*g.collectives.values(), *g.p2p]:
                if e["state"] in ("running", "waiting", "posted") or (
                    e["state"] == "failed" and e["peer"] is not None
                ):
                    if best is None or e["t_posted"] > best[1]["t_posted"]:
                        best = (g, e)
        return best


ENTRY = dict(  # what an entry holds; a field missing from an odd or older file reads as this
    seq=-1,
    kind="collective",
    fn="?",
    algorithm="",
    dtype=None,
    count=None,
    root=None,
    op=None,
    site=None,
    function=None,
    state="?",
    phase="",
    round=-1,
    rounds=0,
    peer=None,
    what=None,
    t_posted=0.0,
    t_started=None,
    t_done=None,
    error=None,
)


def _read(path: Path) -> Dump:
    """Rank ``R``'s file; raises ``ValueError`` saying what is wrong with it."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{type(e).__name__}: {e}") from e
    if not isinstance(doc, dict) or not isinstance(doc.get("rank"), int):
        raise ValueError("not a flight record (no rank)")
    groups = {}
    for g in doc.get("groups") or []:
        try:
            group = Group(str(g["name"]), tuple(g["ranks"]), int(g["rank"]), g.get("failure"))
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"a group without a name, ranks or rank ({e})") from e
        for e in g.get("entries") or []:
            if not isinstance(e, dict):
                continue
            e = {**ENTRY, **e}
            if e["kind"] == "p2p":
                group.p2p.append(e)
            else:
                group.collectives[e["seq"]] = e
        groups[group.key] = group
    return Dump(
        rank=doc["rank"],
        job=str(doc.get("job", "?")),
        host=doc.get("host", "?"),
        reason=doc.get("reason", "?"),
        time=doc.get("time") or 0.0,
        stack=doc.get("stack"),
        exit_error=doc.get("exit_error"),
        groups=groups,
        path=path,
        exit_stack=doc.get("exit_stack"),
    )


def _files(directory: Path) -> list[Path]:
    files = sorted(directory.glob("rank*.json"))
    if files:
        return files
    subdirs = [d for d in directory.iterdir() if d.is_dir() and any(d.glob("rank*.json"))]
    if not subdirs:
        return []
    newest = max(subdirs, key=lambda d: max(f.stat().st_mtime for f in d.glob("rank*.json")))
    return sorted(newest.glob("rank*.json"))


def _latest(d: Dump) -> float:
    """When this rank last did something: its newest call, else when it was written."""
    times = [e["t_posted"] for g in d.groups.values() for e in [*g.collectives.values(), *g.p2p]]
    return max(times, default=d.time)


def load(directory: str | Path) -> tuple[dict[int, Dump], list[str]]:
    """The newest job's dumps by rank, and notes about what was skipped."""
    directory = Path(directory)
    if not directory.is_dir():
        raise FileNotFoundError(f"{directory} is not a directory of flight records")
    dumps, notes, bad = [], [], []
    for path in _files(directory):
        try:
            dumps.append(_read(path))
        except ValueError as e:
            notes.append(f"could not read {path.name} (cut short while written?): {str(e)[:120]}")
            bad.append(path)
    if not dumps:
        return {}, [f"no {'readable ' if notes else ''}flight records (rank*.json) in {directory}", *notes]
    jobs: dict[str, list[Dump]] = {}
    for d in dumps:
        jobs.setdefault(d.job, []).append(d)
    job = max(jobs, key=lambda j: max(_latest(d) for d in jobs[j]))
    if len(jobs) > 1:
        others = sorted(set(jobs) - {job})
        notes.append(f"read job {job}; ignored {sum(len(jobs[j]) for j in others)} file(s) of older job(s)")
    out = {d.rank: d for d in jobs[job]}
    for path in bad:  # a rank whose file is unreadable is not a rank that left none
        r = path.stem.removeprefix("rank")
        if r.isdigit() and int(r) not in out:
            out[int(r)] = Dump(int(r), job, "?", UNREADABLE, 0.0, None, None, {}, path)
    return out, notes
