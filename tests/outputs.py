"""The book's executed notebooks, checked as nbval checks them, without executing anything.

The strict book build (``make book``) executes every page once and writes the
executed notebooks to ``_build/jupyter_execute``. This module reads them:

* every page of the table of contents that is a notebook was executed from
  its current source, and no cell raised;
* every code cell tagged ``nbval-check-output`` (nbval's own tag; in a MyST
  page ``:tags: [nbval-check-output]``) printed what its expected output in
  ``tests/expected_outputs/`` says, compared as nbval compares (streams
  merged, images and metadata left out) after both are sanitised with
  ``tests/expected_outputs/sanitize.cfg`` (nbval's ``--nbval-sanitize-with``
  format) and the checkout's own path.

``python tests/outputs.py expected`` (``make expected``) rewrites the expected
outputs from the last build; ``python tests/outputs.py slowest`` prints the
slowest pages and cells of the last build. Neither executes anything.
"""

from __future__ import annotations

import difflib
import json
import re
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import nbformat
from nbval.plugin import coalesce_streams, get_sanitize_patterns, transform_streams_for_comparison

ROOT = Path(__file__).resolve().parents[1]
EXECUTED = ROOT / "_build" / "jupyter_execute"
EXPECTED = ROOT / "tests" / "expected_outputs"
SANITIZE = EXPECTED / "sanitize.cfg"
TAG = "nbval-check-output"
# What nbval leaves out of a comparison (IPyNbFile.skip_compare, without --nbdime), and SVG and HTML:
# the book's HTML outputs are animations (random element ids around base64 frames).
SKIP = {
    "metadata",
    "traceback",
    "prompt_number",
    "output_type",
    "name",
    "execution_count",
    "application/vnd.jupyter.widget-view+json",
    "image/png",
    "image/jpeg",
    "image/svg+xml",
    "text/html",
}


def pages() -> list[str]:
    """The table of contents' notebook pages (``chapters/x.md``), in its order."""
    names = re.findall(r"^\s*(?:root|-\s*file):\s*(\S+)\s*$", (ROOT / "_toc.yml").read_text(), re.M)
    found = [f"{n}.md" for n in names if (ROOT / f"{n}.md").is_file()]
    return [p for p in found if (ROOT / p).read_text().startswith("---\njupytext:")]


def code_cells(nb) -> list[tuple[int, dict]]:
    """(number, cell) for every code cell, numbered from 1 as the build's log numbers them."""
    return list(enumerate((c for c in nb.cells if c.cell_type == "code"), 1))


def checked(nb) -> list[tuple[int, dict]]:
    return [(n, c) for n, c in code_cells(nb) if TAG in c.get("metadata", {}).get("tags", [])]


def first_line(cell) -> str:
    return next((ln.strip() for ln in cell.source.splitlines() if ln.strip()), "")[:70]


def _patterns() -> list[tuple[str, str]]:
    return get_sanitize_patterns(SANITIZE.read_text()) if SANITIZE.exists() else []


def sanitize(text: str, patterns: list[tuple[str, str]]) -> str:
    text = text.replace(str(ROOT), "<ROOT>")  # this checkout, wherever it is
    for regex, replace in patterns:
        text = re.sub(regex, replace, text)
    return text


def flatten(outputs, patterns) -> dict[str, list[str]]:
    """nbval's view of a cell's outputs: key (stream name or MIME type) -> sanitised values, in order."""
    flat: dict[str, list[str]] = defaultdict(list)
    for out in transform_streams_for_comparison(coalesce_streams([nbformat.from_dict(o) for o in outputs])):
        for key, value in out.items():
            if key in SKIP:
                continue
            items = value.items() if key == "data" else [(key, value)]
            for k, v in items:
                if k not in SKIP:
                    v = "".join(v) if isinstance(v, list) else v
                    flat[k].append(
                        sanitize(v, patterns) if isinstance(v, str) else json.dumps(v, sort_keys=True)
                    )
    return dict(flat)


def expected_path(page: str) -> Path:
    return EXPECTED / Path(page).with_suffix(".json")


def executed_path(page: str) -> Path:
    return EXECUTED / Path(page).with_suffix(".ipynb")


def read_executed(page: str):
    path = executed_path(page)
    if not path.exists():
        raise FileNotFoundError(
            f"{page}: no executed notebook at {path.relative_to(ROOT)}: build the book first"
        )
    return nbformat.read(path, as_version=4)


def unavailable(reason: str) -> None:
    """Skip a test that needs the built book, or fail it in CI (``CI=true``), where the book is built."""
    import os

    import pytest

    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(reason)
    pytest.skip(reason)


def built_or_skip(page: str) -> None:
    """:func:`unavailable` unless the last build executed ``page``."""
    if not executed_path(page).exists():
        unavailable(f"no executed notebook of {page} in _build/jupyter_execute: run `make book` first")


def stale(page: str, nb) -> str | None:
    """Why the executed notebook is not the page's current source, or None."""
    import jupytext

    source = [c.source.strip() for c in jupytext.read(ROOT / page).cells if c.cell_type == "code"]
    ran = [c.source.strip() for _, c in code_cells(nb)]
    if source == ran:
        return None
    changed = next(
        (i for i, (a, b) in enumerate(zip(source, ran), 1) if a != b), min(len(source), len(ran)) + 1
    )
    return f"{page}: the last build executed another version of the page (code cell {changed} differs)"


def _entry(number: int, cell, patterns) -> dict:
    return {
        "cell": number,
        "source": first_line(cell),
        "outputs": {k: [v.split("\n") for v in vals] for k, vals in flatten(cell.outputs, patterns).items()},
    }


def write_expected(page: str, nb) -> int:
    """Rewrite the page's expected outputs from its executed notebook; returns the number of cells."""
    patterns = _patterns()
    cells = [_entry(n, c, patterns) for n, c in checked(nb)]
    path = expected_path(page)
    if not cells:
        path.unlink(missing_ok=True)
        return 0
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"page": page, "cells": cells}, indent=1, ensure_ascii=False) + "\n")
    return len(cells)


@dataclass
class PageCheck:
    """What the check of one page found: code cells executed, outputs compared, failures."""

    page: str
    cells: int = 0
    compared: int = 0
    failures: list[str] = field(default_factory=list)


def _raised(page: str, nb) -> list[str]:
    """Cells that raised or did not run (MyST-NB's raises-exception and skip-execution tags allow it)."""
    found = []
    for n, cell in code_cells(nb):
        tags = cell.get("metadata", {}).get("tags", [])
        for out in cell.outputs:
            if out.output_type == "error" and "raises-exception" not in tags:
                found.append(f"{page}, code cell {n} ({first_line(cell)}): raised {out.ename}: {out.evalue}")
        if cell.execution_count is None and cell.source.strip() and "skip-execution" not in tags:
            found.append(f"{page}, code cell {n} ({first_line(cell)}): not executed")
    return found


def _difference(page: str, number: int, cell, want: dict, got: dict) -> str:
    lines = [
        f"{page}, code cell {number} ({first_line(cell)}): its output differs from {expected_path(page).relative_to(ROOT)}"
    ]
    for key in sorted(set(want) | set(got)):
        a = ["\n".join(v) for v in want.get(key, [])]
        b = ["\n".join(v) for v in got.get(key, [])]
        if a != b:
            diff = difflib.unified_diff(
                "\n".join(a).splitlines(),
                "\n".join(b).splitlines(),
                "expected",
                "this build",
                lineterm="",
                n=1,
            )
            lines += [f"  {key}:"] + [f"    {d}" for d in diff]
    return "\n".join(lines)


def check_page(page: str) -> PageCheck:
    """The page executed from its current source without error, and its tagged cells printed what is expected."""
    nb = read_executed(page)
    result = PageCheck(page, cells=len(code_cells(nb)))
    why = stale(page, nb)
    if why:
        result.failures.append(why + ": run `make book`")
        return result
    result.failures += _raised(page, nb)
    path = expected_path(page)
    expected = json.loads(path.read_text())["cells"] if path.exists() else []
    tagged = checked(nb)
    if len(tagged) != len(expected):
        result.failures.append(
            f"{page}: {len(tagged)} code cell(s) tagged {TAG}, {len(expected)} in "
            f"{path.relative_to(ROOT)}: if that is meant, `make expected` after `make book` rewrites it"
        )
        return result
    patterns = _patterns()
    for (number, cell), want in zip(tagged, expected):
        got = _entry(number, cell, patterns)["outputs"]
        want = {
            k: [sanitize("\n".join(v), patterns).split("\n") for v in vals]
            for k, vals in want["outputs"].items()
        }
        result.compared += 1
        if got != want:
            result.failures.append(_difference(page, number, cell, want, got))
    return result


def cell_seconds(nb) -> list[tuple[float, int, str]]:
    """(seconds, number, first line) of each code cell, from the timings the build recorded."""
    found = []
    for number, cell in code_cells(nb):
        stamps = cell.get("metadata", {}).get("execution", {})
        try:
            start = datetime.fromisoformat(stamps["iopub.status.busy"].replace("Z", "+00:00"))
            end = datetime.fromisoformat(stamps["iopub.status.idle"].replace("Z", "+00:00"))
        except (KeyError, TypeError, ValueError):
            continue
        found.append(((end - start).total_seconds(), number, first_line(cell)))
    return found


def slowest(n: int = 10) -> str:
    """The slowest pages and cells of the last build, as a report."""
    page_times, cell_times = [], []
    for page in pages():
        if executed_path(page).exists():
            cells = cell_seconds(read_executed(page))
            page_times.append((sum(s for s, _, _ in cells), page))
            cell_times += [(s, f"{page}, code cell {num} ({line})") for s, num, line in cells]
    out = [f"slowest {n} pages of the last build (seconds of cell execution):"]
    out += [f"  {s:7.1f} s  {p}" for s, p in sorted(page_times, reverse=True)[:n]]
    out += [f"slowest {n} cells of the last build:"]
    out += [f"  {s:7.1f} s  {c}" for s, c in sorted(cell_times, reverse=True)[:n]]
    return "\n".join(out)


def main(argv: list[str]) -> int:
    if argv == ["expected"]:
        notebooks = {page: read_executed(page) for page in pages()}
        why = [w for page, nb in notebooks.items() if (w := stale(page, nb))]
        why += [w for page, nb in notebooks.items() for w in _raised(page, nb)]
        if why:
            print(
                "\n".join(why) + "\nrun `make book` until it passes first; nothing written", file=sys.stderr
            )
            return 1
        total = sum(write_expected(page, nb) for page, nb in notebooks.items())
        print(
            f"wrote the expected outputs of {total} cell(s) to {EXPECTED.relative_to(ROOT)}/ from the last build"
        )
        return 0
    if argv == ["slowest"]:
        print(slowest())
        return 0
    print("usage: python tests/outputs.py expected|slowest", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
