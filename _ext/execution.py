"""A build that never reports success over a broken page, and says what it executes.

Loaded via ``_config.yml`` (``local_extensions``). MyST-NB executes each page
with jupyter-cache (``execute_notebooks: cache``). On its own, a failed
execution is one warning: the page is still written with whatever ran (a
traceback with the machine's paths, empty plots), the environment records the
page as read, and the next build re-reads nothing and exits 0. Here:

* a page whose execution failed, or whose outputs hold a traceback, is an
  error (the build's status is 1, with or without ``-W``) and is published
  without any cell output (no partial results, no traceback with the paths of
  the machine that built it);
* the environment remembers the page as failed, so the next build reads and
  executes it again (``env-get-outdated``), and fails again until it is fixed;
* MyST-NB's traceback logs (``reports/`` under the HTML output) are moved out
  of the published folder, to ``_build/reports/``;
* each page that executes prints ``executing chapters/X.md ...`` when it
  starts and ``  ... 12.3 s, slowest cell 4: 3.1 s`` when it ends (code
  cells counted from 1; the kernel may print between the two), and the build ends with one line of totals; pages served from the cache are
  counted, not listed.
"""

from __future__ import annotations

import shutil
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from sphinx.util import logging

logger = logging.getLogger(__name__)

_STATE: dict[str, Any] = {"executed": 0, "seconds": 0.0, "cached": 0}
_FAILED: list[str] = []  # pages of this build that failed
_EXECUTED_NOW: set[str] = set()  # pages executed by this build (the others came from the cache)


def _say(text: str) -> None:
    """Progress on the terminal even under ``jupyter-book build -q`` (which silences Sphinx's log)."""
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _has_class(node: Any, name: str) -> bool:
    return hasattr(node, "get") and name in (node.get("classes") or [])


def _exec_data(env: Any, docname: str) -> dict | None:
    return getattr(env, "nb_metadata", {}).get(docname, {}).get("exec_data")


def _source_name(env: Any, docname: str) -> str:
    try:
        return str(Path(env.doc2path(docname, False)))
    except Exception:  # noqa: BLE001 - a name for a message only
        return docname


def _wrap_execution(app: Any) -> None:
    """Print the page before jupyter-cache executes it and the seconds after."""
    _STATE.update(executed=0, seconds=0.0, cached=0)  # one build's totals
    _FAILED.clear()
    _EXECUTED_NOW.clear()
    try:
        from myst_nb.core.execute import cache as nb_cache
    except ImportError:  # another MyST-NB layout: pages are still checked, not announced
        return
    execute = nb_cache.single_nb_execution
    if getattr(execute, "_announces", False):
        return

    def announced(*args: Any, **kwargs: Any) -> Any:
        env = app.env
        _say(f"executing {_source_name(env, env.docname)} ...")
        start = time.perf_counter()
        result = execute(*args, **{**kwargs, "record_timing": True})  # cell timings for _slowest_cell
        seconds = time.perf_counter() - start
        _STATE["executed"] += 1
        _EXECUTED_NOW.add(env.docname)
        _STATE["seconds"] += seconds
        failed = "" if result.err is None else f", FAILED ({type(result.err).__name__})"
        _say(f"  ... {seconds:.1f} s{_slowest_cell(args[0] if args else kwargs.get('nb'))}{failed}")
        return result

    announced._announces = True  # type: ignore[attr-defined]
    nb_cache.single_nb_execution = announced


def _slowest_cell(notebook: Any) -> str:
    """``, slowest cell N: S s`` from the timings nbclient records in each cell's metadata."""
    slowest = (0.0, 0)
    code_cells = [c for c in getattr(notebook, "cells", []) or [] if c.get("cell_type") == "code"]
    for number, cell in enumerate(code_cells, 1):
        stamps = cell.get("metadata", {}).get("execution", {})
        try:
            start = datetime.fromisoformat(stamps["iopub.status.busy"].replace("Z", "+00:00"))
            end = datetime.fromisoformat(stamps["iopub.status.idle"].replace("Z", "+00:00"))
        except (KeyError, TypeError, ValueError):
            continue
        slowest = max(slowest, ((end - start).total_seconds(), number))
    return f", slowest cell {slowest[1]}: {slowest[0]:.1f} s" if slowest[1] else ""


def _tracebacks(doctree: Any) -> list[Any]:
    """Output nodes MyST-NB rendered from a cell's error (class ``traceback``)."""
    return list(doctree.findall(lambda n: _has_class(n, "traceback")))


def _last_line(node: Any) -> str:
    lines = [ln for ln in node.astext().splitlines() if ln.strip()]
    return lines[-1].strip()[:200] if lines else "an error output"


def _check_page(app: Any, doctree: Any) -> None:
    """Fail the build on a page that did not execute or shows a traceback, and strip its outputs."""
    env = app.env
    data = _exec_data(env, env.docname)
    if data is not None and data.get("succeeded") and env.docname not in _EXECUTED_NOW:
        _STATE["cached"] += 1
    errors = _tracebacks(doctree)
    if (data is None or data.get("succeeded")) and not errors:
        return
    what = data.get("error") if data and not data.get("succeeded") else None
    reason = ", ".join(x for x in (what, _last_line(errors[0]) if errors else "") if x) or "a cell raised"
    for node in list(doctree.findall(lambda n: _has_class(n, "cell_output"))):
        node.parent.remove(node)  # partial outputs, tracebacks with local paths: none is published
    _failed(env).add(env.docname)
    _FAILED.append(env.docname)
    logger.error(
        f"executing the page failed ({reason}); its outputs are left out and the build fails "
        "until it executes (the traceback: _build/reports/)",
        location=env.docname,
    )


def _failed(env: Any) -> set[str]:
    """Pages whose last reading failed; kept in the environment, so the next build reads them again."""
    if not hasattr(env, "failed_executions"):
        env.failed_executions = set()
    return env.failed_executions


def _purge(app: Any, env: Any, docname: str) -> None:
    _failed(env).discard(docname)


def _failed_before(app: Any, env: Any, added: set, changed: set, removed: set) -> list[str]:
    """Pages an earlier build recorded as failed: read (and execute) them again."""
    recorded = {
        doc
        for doc, meta in getattr(env, "nb_metadata", {}).items()
        if (meta.get("exec_data") or {}).get("succeeded") is False
    }
    return sorted((recorded | _failed(env)) & set(env.found_docs))


def _move_reports(app: Any, exception: Exception | None) -> None:
    """Keep MyST-NB's traceback logs out of the published HTML; print the totals."""
    reports = Path(app.outdir) / "reports"
    if reports.is_dir():
        target = Path(app.outdir).parent / "reports"
        shutil.rmtree(target, ignore_errors=True)
        shutil.move(str(reports), str(target))
    if _FAILED:
        app.statuscode = 1  # fails even without -W
        _say("failed to execute: " + ", ".join(_source_name(app.env, d) for d in _FAILED))
    if _STATE["executed"] or _STATE["cached"]:
        _say(
            f"executed {_STATE['executed']} page(s) in {_STATE['seconds']:.1f} s; "
            f"{_STATE['cached']} from the cache"
        )


def setup(app: Any) -> dict[str, Any]:
    app.connect("builder-inited", _wrap_execution)
    app.connect("env-get-outdated", _failed_before)
    app.connect("doctree-read", _check_page)
    app.connect("env-purge-doc", _purge)
    app.connect("build-finished", _move_reports)
    return {"parallel_read_safe": False, "parallel_write_safe": True}
