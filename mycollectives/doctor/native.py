"""Ranks that died in native code: ``rank{R}.native``, what :mod:`mycollectives.flight.native` has
Python's faulthandler write when a rank is ended by ``abort()`` or a fault, read by the doctor.

Such a rank wrote no flight record (or one cut short), so without this file
it would be "died". The file says how it ended ("Fatal Python error:
Aborted") and where each thread's Python stack was; the main thread's frame
in the program, matched against the other ranks' records of the same call
site, names the collective it died in.
"""

from __future__ import annotations

import re
from pathlib import Path

from . import text
from .model import Dump

NATIVE = "native abort"  # the reason of a rank whose only trace is its rank{R}.native
_FRAME = re.compile(r'\s*File "(.*)", line (\d+) in (.*)$')
_SLACK_S = 5.0  # a .native file older than the run's start by more than this is an earlier run's


def read(path: Path) -> tuple[str, list[list]] | None:
    """(how it ended, the main thread's frames innermost first), or None if ``path`` holds neither."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return None
    how = next((ln.strip() for ln in lines if ln.startswith("Fatal Python error")), None)
    if how is None:
        return None
    stacks, cur = [], None
    for ln in lines:
        if ln.startswith(("Thread 0x", "Current thread 0x")):
            cur = []
            stacks.append(cur)
        elif cur is not None and (m := _FRAME.match(ln)):
            cur.append([m.group(1), int(m.group(2)), m.group(3)])
    main = next((s for s in stacks if s and s[-1][2] == "<module>"), stacks[0] if stacks else [])
    return how, main


def placeholders(directory: Path, dumps: dict[int, Dump], world: int, since: float) -> None:
    """A :data:`NATIVE` record for each rank below ``world`` that has no readable record of this run
    and a ``rank{R}.native`` written since ``since``."""
    job = next(iter(dumps.values())).job if dumps else "?"
    for path in sorted(directory.glob("rank*.native")):
        r = path.stem.removeprefix("rank")
        if not r.isdigit() or int(r) >= world or (int(r) in dumps and dumps[int(r)].reason != "unreadable"):
            continue
        try:
            when = path.stat().st_mtime
        except OSError:
            continue
        found = read(path) if when >= since - _SLACK_S else None
        if found is not None:
            how, stack = found
            dumps[int(r)] = Dump(int(r), job, "?", NATIVE, when, stack, how, {}, path)


def frame(d: Dump) -> tuple[str, int, str] | None:
    """The innermost frame of the program itself in the dead rank's main thread."""
    for file, line, func in d.stack or []:
        if not (file.startswith(text._PACKAGE) or "/torch/" in file or "/threading.py" in file):
            return file, line, func
    return None


def died_in(d: Dump, dumps: dict[int, Dump]) -> tuple[int, str, dict] | None:
    """(seq, group, the others' entry) of the latest call the others made at the dead rank's frame."""
    f = frame(d)
    if f is None:
        return None
    at = f"{f[0]}:{f[1]}"
    hits = [
        (e["t_posted"], k, g.name, e)
        for x in dumps.values()
        for g in x.groups.values()
        for k, e in g.collectives.items()
        if e.get("site") == at
    ]
    if not hits:
        return None
    _, k, g, e = max(hits, key=lambda h: h[:2])
    return k, g, e


def said(d: Dump, dumps: dict[int, Dump]) -> tuple[str, int | None]:
    """``aborted in native code (...) at f.py:10 in <module>(), in seq 3 (...)``, and that seq."""
    f = frame(d)
    line = f" aborted in native code ({d.exit_error}; {d.path.name})"
    line += f" at {text.frame(f)}" if f else ""
    hit = died_in(d, dumps)
    if hit is None:
        return line, None
    k, g, e = hit
    theirs = {
        r: gg.collectives[k]
        for r, x in sorted(dumps.items())
        for gg in x.groups.values()
        if gg.name == g and k in gg.collectives
    }
    sizes = ", ".join(f"rank {r} passed {text.size(x)}" for r, x in theirs.items())
    line += f", in seq {k} ({e['fn']}: {sizes})"
    if "Aborted" in str(d.exit_error):
        line += (
            "; a likely cause: gloo aborts a rank that receives more bytes than it posted for, "
            "as when ranks pass different sizes with check=False"
        )
    return line, k
