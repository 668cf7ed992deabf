"""How the doctor names things: ranks, calls, and where a rank's main thread was."""

from __future__ import annotations

import os
from pathlib import Path

_PACKAGE = str(Path(__file__).resolve().parent.parent) + os.sep


def ranks(rs) -> str:
    """``rank 2``, ``ranks 0, 1, 3``, or ``ranks 0-7``."""
    rs = sorted(set(rs))
    if len(rs) == 1:
        return f"rank {rs[0]}"
    if len(rs) >= 3 and rs == list(range(rs[0], rs[-1] + 1)):
        return f"ranks {rs[0]}-{rs[-1]}"
    return "ranks " + ", ".join(map(str, rs))


def unknown(d) -> str:
    """Why what rank ``d.rank`` did is unknown (its record is :data:`~.load.UNKNOWN`), to follow
    "rank R": what its file is."""
    if d.reason == "unreadable":
        return f"'s flight record {d.path.name} could not be read (cut short?)"
    if d.reason == "native abort":
        return f" aborted in native code ({d.exit_error}; {d.path.name})"
    return f" has no record of this job: its file {d.path.name} holds another job's"


def site(entry: dict) -> str:
    """``file.py:57`` (``a notebook cell, line 8`` for a Jupyter cell), or empty."""
    where = entry.get("site")
    if not where:
        return ""
    path, _, line = where.rpartition(":")
    if "ipykernel_" in path:
        return f"a notebook cell, line {line}"
    return f"{Path(path).name}:{line}"


def size(entry: dict) -> str:
    if entry.get("count") is None:
        return "bad arguments"
    return f"{entry['count']} {entry['dtype']}"


def call(entry: dict, with_site: bool = True) -> str:
    """``all_reduce of 1024 float32 at train.py:57``."""
    where = f" at {site(entry)}" if with_site and entry.get("site") else ""
    return f"{entry['fn']} of {size(entry)}{where}"


def p2p(entry: dict) -> str:
    """``recv from rank 1 (p2p #3, 256 float32 at pipe.py:40)``."""
    direction = "to" if entry["fn"] == "send" else "from"
    where = f" at {site(entry)}" if entry.get("site") else ""
    return f"{entry['fn']} {direction} rank {entry['root']} (p2p #{entry['seq']}, {size(entry)}{where})"


def user_frame(stack: list | None) -> tuple[str, int, str] | None:
    """The innermost frame of the program itself (not this package, not the standard library's
    threading and signal machinery): ``(file, line, function)``."""
    for file, line, func in stack or []:
        if file.startswith(_PACKAGE) or "/threading.py" in file or file.startswith("<"):
            continue
        return file, line, func
    return None


def in_torch_distributed(stack: list | None) -> tuple[str, int, str] | None:
    """The outermost frame inside ``torch.distributed`` that the main thread is in, if any."""
    hit = None
    for file, line, func in stack or []:
        if f"{os.sep}torch{os.sep}distributed{os.sep}" in file and func != "wrapper":  # not a decorator
            hit = (file, line, func)
    return hit


def frame(f: tuple[str, int, str]) -> str:
    return f"{Path(f[0]).name}:{f[1]} in {f[2]}()"
