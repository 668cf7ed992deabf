"""No page prints or states an exercise's numeric answer above the exercise.

``test_exercises_hidden.py`` checks the order of the cells and what the check
cells print on placeholders; this module reads each page as the book build
executed it (``_build/jupyter_execute``) and what a reader sees *before*
answering: the text of every cell above each exercise (and of the cells that
set its question up), its outputs and the prose. It takes the answers the
exercise's solution set (the names the placeholder cell leaves as ``None``)
from what the build's kernel recorded after each cell
(``mycollectives.book.answers``), and fails if one of them appears there (in
the prose, the code, and the outputs that are the same on every run: the
cells tagged ``nbval-check-output``), in any unit (seconds, milliseconds,
microseconds; bytes, kB, MB, GB, and KiB, MiB, GiB where the page prints that
unit) to three significant figures. Small integers and powers of two are left
out: they occur everywhere by chance, and so are the values of keyword
arguments in code (settings such as ``figsize``).

Nothing executes here: without a build the tests skip (in CI they fail).
"""

from __future__ import annotations

import ast
import math
import re
from pathlib import Path

import pytest

from mycollectives.book import answers
from tests.test_exercises_hidden import PAGES, ROOT, cells, exercises

pytest.importorskip("nbformat", reason="needs nbval's dependencies (pip install -e .[test])")
pytest.importorskip("jupytext", reason="needs the book's dependencies (pip install -e .[book])")
import outputs  # noqa: E402 - after the checks above

pytestmark = pytest.mark.built
ANSWERS = ROOT / "_build" / "answers"  # where the build's kernels record what each cell set
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


def settings_blanked(source: str) -> str:
    """A code cell's source with the values of its calls' keyword arguments blanked: they are
    settings (``figsize=(7, 2.6)``, ``bbox_to_anchor=(1.01, 1)``), not results, and a measured
    answer that rounds to one of them does so by chance."""
    try:
        tree = ast.parse(source)
    except SyntaxError:  # a magic, or prose
        return source
    lines = [ln.encode() for ln in source.splitlines()]  # ast's columns count UTF-8 bytes
    spans = [
        (k.value.lineno, k.value.col_offset, k.value.end_lineno, k.value.end_col_offset)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        for k in node.keywords
    ]
    for first, start, last, end in sorted(spans, reverse=True):
        for n in range(first - 1, last):
            a = start if n == first - 1 else 0
            b = end if n == last - 1 else len(lines[n])
            lines[n] = lines[n][:a] + b" " * (b - a) + lines[n][b:]
    return "\n".join(ln.decode(errors="replace") for ln in lines)


def text_of(cell) -> str:
    """A cell's source, and its outputs where they are the same on every run (tagged ``CHECKED``): a measurement varies from run to run, and one of its numbers matching an
    answer to three figures is chance, not a leak."""
    parts = [settings_blanked(cell.source) if cell.cell_type == "code" else cell.source]
    if CHECKED not in cell.get("metadata", {}).get("tags", []):
        return parts[0]
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            parts.append(out["text"])
        elif "data" in out:
            parts.append(out["data"].get("text/plain", ""))
    return "\n".join(parts)


def answers_by_exercise(page: Path, nb) -> list[dict[str, float]]:
    """What each exercise's solution left in its answer names, as the build's kernel recorded it
    after each cell (``mycollectives.book.answers``)."""
    names = [answer_names(before) for before, _ in exercises(page.read_text())]
    code = [c for c in nb.cells if c.cell_type == "code"]
    sets = answers.read(ANSWERS, [c.source for c in code])
    if sets is None:
        outputs.unavailable(
            f"{page.name}: no record of what its cells set in {ANSWERS.relative_to(ROOT)}: "
            "build the book with `make fresh-book` (a cached page records nothing)"
        )
    state: dict[str, float] = {}
    found, k, done = [], 0, iter(sets)
    for cell in nb.cells:
        if cell.cell_type == "code":
            state.update(next(done))
        elif "{solution-end}" in cell.source and k < len(names):
            found.append({n: state[n] for n in names[k] if n in state})
            k += 1
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_answer_is_shown_above_its_exercise(page):
    if not list(exercises(page.read_text())):
        pytest.skip(f"{page.name} has no exercise")
    name = page.relative_to(ROOT).as_posix()
    outputs.built_or_skip(name)
    nb = outputs.read_executed(name)
    why = outputs.stale(name, nb)
    if why:
        pytest.fail(why + ": run `make book`")
    by_exercise = iter(answers_by_exercise(page, nb))
    seen: list[tuple[str, str]] = []  # the numbers a reader has seen so far, with any binary unit
    leaks = []
    for cell in nb.cells:
        if "{solution-start}" in cell.source:
            seen_before_solution = len(seen)
        if cell.cell_type == "markdown" and "{solution-end}" in cell.source:
            del seen[seen_before_solution:]  # a solution's own text is behind its dropdown
            for name, x in next(by_exercise, {}).items():
                where = shown(seen, x) if notable(x) else None
                if where:
                    leaks.append(f"{name} = {x:g} is shown above its exercise as {where}")
            continue
        seen += NUMBER.findall(text_of(cell))
    assert not leaks, f"{page.name}: " + "; ".join(leaks)
