"""What each cell of a page set, recorded as the book's build executes the page.

The hidden-answer test (``tests/test_exercises_hidden_outputs.py``) needs the
values an exercise's solution computes, to make sure no cell above the
exercise shows them. Executing every page a second time to ask for them cost
minutes, so the build's kernels record them instead: after every cell, the
int and float globals that the cell created or changed, in execution order,
with a hash of the cell's source. One JSON file per kernel, in the folder the
build names (``_ipython``'s startup file installs this; importing the package
installs nothing).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
import time
from pathlib import Path


def source_key(source: str) -> str:
    """The key of a cell's source in a record (the build and the test hash the same text)."""
    return hashlib.sha1(source.strip().encode()).hexdigest()


def _numbers(namespace: dict) -> dict[str, float]:
    return {
        k: v
        for k, v in namespace.items()
        if not k.startswith("_")
        and isinstance(v, int | float)
        and not isinstance(v, bool)
        and math.isfinite(v)
    }


def install(folder: Path) -> Path:
    """Record every cell the running IPython kernel executes into a new file in ``folder``."""
    from IPython import get_ipython

    shell = get_ipython()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{os.getpid()}-{time.time_ns()}.json"
    entries: list[dict] = []
    before: dict[str, float] = {}

    def after_cell(result) -> None:
        nonlocal before
        now = _numbers(shell.user_ns)
        changed = {k: v for k, v in now.items() if k not in before or before[k] != v}
        before = now
        entries.append({"source": source_key(result.info.raw_cell or ""), "set": changed})
        path.write_text(json.dumps(entries))

    shell.events.register("post_run_cell", after_cell)
    return path


def install_in_notebook(folder: Path) -> None:
    """:func:`install` when running in an IPython kernel (where the book's pages run); else nothing."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is not None and getattr(shell, "kernel", None) is not None:
        install(folder)


def read(folder: Path, sources: list[str]) -> list[dict[str, float]] | None:
    """What each of ``sources`` (a page's code cells, in order) set, from the newest record whose
    cells are those sources; None when no kernel in ``folder`` executed exactly them."""
    want = [source_key(s) for s in sources if s.strip()]
    files = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
    for path in files:
        try:
            entries = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if [e["source"] for e in entries] == want:
            found = iter(entries)
            return [next(found)["set"] if s.strip() else {} for s in sources]
    return None


__all__ = ["install", "install_in_notebook", "read", "source_key"]
