"""A trace of a rank that dies in native code, where no Python handler runs (chapter 6).

Gloo ends a process that receives a message larger than it posted for (with
``check=False`` the ranks' sizes are not compared first) by ``abort()``; a
segmentation fault ends one too. Neither lets the flight recorder write its
record, so the doctor would see only an absent rank. Under ``torchrun`` (or
with ``MYCOLLECTIVES_FLIGHT_DIR`` set) each rank therefore points Python's
``faulthandler`` at ``DIR/rank{R}.native``: on such a death it writes
"Fatal Python error: Aborted" and every thread's Python stack there, from
the signal handler, with no Python code run. The file is removed at a normal
exit if it is empty. A program that enabled faulthandler itself (``python -X
faulthandler``, pytest) keeps its own.
"""

from __future__ import annotations

import atexit
import contextlib
import faulthandler
import os
from pathlib import Path


def arm_native(directory: Path) -> Path | None:
    """Have a native death of this rank (``RANK``) leave ``directory/rank{R}.native``; its path, or None."""
    rank = os.environ.get("RANK", "")
    if not rank.isdigit() or faulthandler.is_enabled():
        return None
    path = directory / f"rank{int(rank)}.native"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        out = open(path, "w")  # noqa: SIM115 - kept open: the handler writes to its descriptor
        faulthandler.enable(file=out, all_threads=True)
    except OSError:
        return None
    atexit.register(_tidy, out, path)
    return path


def _tidy(out, path: Path) -> None:
    """A normal exit: nothing was written, so nothing is left."""
    with contextlib.suppress(OSError, ValueError):
        if faulthandler.is_enabled():
            faulthandler.disable()
        out.close()
        if path.stat().st_size == 0:
            path.unlink()
