"""No page prints or states an exercise's numeric answer above the exercise.

``test_exercises_hidden.py`` checks the order of the cells and what the check
cells print on placeholders; this module executes each page as the build
does and reads what a reader sees *before* answering: the text of every cell
above each exercise (and of the cells that set its question up), its outputs
and the prose. It then runs the exercise's solution, reads the answers it
sets (the names the placeholder cell leaves as ``None``), and fails if one of
them appears there (in the prose, the code, and the outputs that are the same
on every run: the cells tagged ``nbval-check-output``), in any unit (seconds, milliseconds, microseconds; bytes,
kB, MB, GB, and KiB, MiB, GiB where the page prints that unit) to three
significant figures. Small integers and powers of
two are left out: they occur everywhere by chance.

Executing every page is the book build's cost, so these tests carry the
``book`` mark and run with it.
"""

from __future__ import annotations

import ast
import json
import math
import os
import re
from pathlib import Path

import pytest

from tests.test_exercises_hidden import PAGES, cells, exercises

jupytext = pytest.importorskip("jupytext", reason="the book's dependencies are not installed")
nbclient = pytest.importorskip("nbclient", reason="the book's dependencies are not installed")
pytestmark = [pytest.mark.book, pytest.mark.timeout(1800)]

MARK = "__exercise_answers__"
NUMBER = re.compile(r"(?<![\w.])([-+]?(?:\d[\d,]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s?(KiB|MiB|GiB)?")
DECIMAL = [10.0**k for k in range(-12, 13, 3)]  # s, ms, us, ns; B, kB, MB, GB ...
BINARY = {"KiB": 2.0**10, "MiB": 2.0**20, "GiB": 2.0**30}  # a byte count printed with its binary unit


def answer_names(before: str) -> list[str]:
    """The names an exercise's answer cells leave as placeholders (None or ...)."""
    names = []
    for code in cells(before):
        for node in ast.parse(code).body:
            value = getattr(node, "value", None)
            if (
                isinstance(node, ast.Assign)
                and isinstance(value, ast.Constant)
                and value.value in (None, ...)
            ):
                names += [t.id for t in node.targets if isinstance(t, ast.Name)]
    return names


def significant(text: str) -> int:
    """Significant figures of a printed number: an integer's trailing zeros only place its
    digits ("100" has one, "100.0" four)."""
    mantissa = re.sub(r"[eE].*$", "", text).replace(",", "")
    digits = mantissa.replace(".", "").lstrip("+-0")
    return len(digits if "." in mantissa else digits.rstrip("0"))


def shown(numbers: list[tuple[str, str]], x: float) -> str | None:
    """The first printed number (three significant figures or more, or the integer ``x`` itself
    with three digits or more) equal to ``x`` in some unit: a power of a thousand, or the
    binary unit printed after it (a byte count)."""
    for text, unit in numbers:
        y = float(text.replace(",", ""))
        itself = float(x).is_integer() and y == x and abs(y) >= 100
        if significant(text) < 3 and not itself:
            continue
        scales = DECIMAL + ([BINARY[unit]] if unit and float(x).is_integer() else [])
        if any(math.isclose(y * s, x, rel_tol=2e-3) for s in scales):
            return f"{text} {unit}".strip()
    return None


def notable(x) -> bool:
    if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x) or x == 0:
        return False
    if float(x).is_integer():
        n = abs(int(x))
        return n >= 10 and n & (n - 1) != 0  # small integers and powers of two occur by chance
    return True


CHECKED = "nbval-check-output"  # the tag of a cell whose output is the same on every run


def text_of(cell) -> str:
    """A cell's source, and its outputs where they are the same on every run (tagged ``CHECKED``,
    or the probe's): a measurement varies from run to run, and one of its numbers matching an
    answer to three figures is chance, not a leak."""
    parts = [cell.source]
    if CHECKED not in cell.get("metadata", {}).get("tags", []) and MARK not in cell.source:
        return parts[0]
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            parts.append(out["text"])
        elif "data" in out:
            parts.append(out["data"].get("text/plain", ""))
    return "\n".join(parts)


def execute(page: Path):
    """The page as a notebook, a probe cell after each solution printing its answers, executed."""
    nb = jupytext.read(page)
    names = [answer_names(before) for before, _ in exercises(page.read_text())]
    out, k = [], 0
    for cell in nb.cells:
        out.append(cell)
        if cell.cell_type == "markdown" and "{solution-end}" in cell.source and k < len(names):
            probe = (
                f"import json as _j\nprint({MARK!r}, _j.dumps({{n: globals().get(n) for n in {names[k]!r} "
                "if isinstance(globals().get(n), (int, float))}))"
            )
            out.append(jupytext.reads(f"```python\n{probe}\n```", fmt="md").cells[0])
            k += 1
    nb.cells = out
    env = {"MYCOLLECTIVES_DEVICE": "cpu", "MPLBACKEND": "Agg"}
    os.environ.update(env)
    nbclient.NotebookClient(nb, timeout=600, resources={"metadata": {"path": str(page.parent)}}).execute()
    return nb


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_answer_is_shown_above_its_exercise(page):
    if not list(exercises(page.read_text())):
        pytest.skip(f"{page.name} has no exercise")
    nb = execute(page)
    seen: list[tuple[str, str]] = []  # the numbers a reader has seen so far, with any binary unit
    leaks = []
    for cell in nb.cells:
        text = text_of(cell)
        if MARK in text:
            answers = json.loads(text.split(MARK, 2)[2].strip().splitlines()[0])
            for name, x in answers.items():
                where = shown(seen, x) if notable(x) else None
                if where:
                    leaks.append(f"{name} = {x:g} is shown above its exercise as {where}")
            continue
        if "{solution-start}" in cell.source:
            seen_before_solution = len(seen)
        if cell.cell_type == "markdown" and "{solution-end}" in cell.source:
            del seen[seen_before_solution:]  # a solution's own text is behind its dropdown
            continue
        seen += NUMBER.findall(text)
    assert not leaks, f"{page.name}: " + "; ".join(leaks)
