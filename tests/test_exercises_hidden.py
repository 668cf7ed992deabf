"""No page gives an exercise's answer away before the reader has answered.

The pages run top to bottom when the book is built, with every answer cell
still holding its placeholder (``None``, or code that raises
``NotImplementedError``). So on each page (lab 6, whose exercise checks a
schedule the reader writes beside the script, is skipped here) every exercise's check cell
must come before its solution, every answer
cell must hold placeholders, and each check cell, run on those
placeholders, must print "not answered yet" and no success line or value.
The solutions themselves are checked in the chapter's ``test_exercises_*``
module, which calls each check with the right answer and with wrong ones.
"""

from __future__ import annotations

import ast
import contextlib
import io
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted(
    p
    for p in [
        *ROOT.glob("*.md"),
        *ROOT.glob("chapters/*.md"),
        *ROOT.glob("labs/*.md"),
        *ROOT.glob("appendix/*.md"),
    ]
    if not p.name.startswith("_") and p.read_text().startswith("---\njupytext:")
)
CELL = re.compile(r"^```\{code-cell\}[^\n]*\n(.*?)^```$", re.S | re.M)
EXERCISE = re.compile(r"^```\{exercise\}", re.M)
CHECK = re.compile(r"\bcheck_\w+\(")
OPTION = re.compile(r"^(:\w[\w-]*:.*|---)$\n?", re.M)


def cells(text: str) -> list[str]:
    """The code of the code cells of ``text``, without their ``:tags:`` options."""
    return [OPTION.sub("", c) for c in CELL.findall(text)]


def exercises(text: str) -> list[tuple[str, str]]:
    """Each exercise's text up to its solution, and from its solution to the next exercise."""
    starts = [m.start() for m in EXERCISE.finditer(text)] + [len(text)]
    out = []
    for a, b in zip(starts, starts[1:]):
        part = text[a:b]
        cut = part.find("````{solution-start}")
        assert cut > 0, f"an exercise without a solution: {part[:80]!r}"
        out.append((part[:cut], part[cut:]))
    return out


def _is_placeholder(value: ast.expr | None) -> bool:
    if isinstance(value, ast.Tuple):
        return all(_is_placeholder(v) for v in value.elts)
    return isinstance(value, ast.Constant) and value.value in (None, Ellipsis)


def placeholders(code: str) -> tuple[int, list[str]]:
    """How many answers ``code`` leaves as placeholders (None or ``...``, or a function whose
    body ends by raising NotImplementedError), and the functions that end otherwise (the
    given data the cell may compute besides is not an answer)."""
    count, bad = 0, []
    for node in ast.parse(code).body:
        if isinstance(node, ast.Assign | ast.AnnAssign) and _is_placeholder(node.value):
            count += 1
        elif isinstance(node, ast.FunctionDef):
            last = node.body[-1]
            if isinstance(last, ast.Raise) and "NotImplementedError" in ast.unparse(last):
                count += 1
            else:
                bad.append(node.name)
    return count, bad


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_checks_come_before_solutions_and_answers_start_empty(page):
    for before, after in exercises(page.read_text()):
        code = cells(before)
        checks = [c for c in code if CHECK.search(c)]
        assert checks, f"{page.name}: the check of {before[:70]!r} is not before its solution"
        assert not any(CHECK.search(c) for c in cells(after.split("````{solution-end}")[0])), page.name
        counts = [placeholders(c) for c in code if not CHECK.search(c)]
        assert sum(n for n, _ in counts) > 0, (
            f"{page.name}: no answer cell with a placeholder: {before[:70]!r}"
        )
        bad = [name for _, names in counts for name in names]
        assert not bad, f"{page.name}: {bad} must raise NotImplementedError until the reader writes them"


def _ours(node: ast.ImportFrom) -> bool:
    return (node.module or "").split(".")[0] in ("mycollectives", "torch", "math")


class Placeholders(dict):
    """A namespace in which every name not yet defined is the placeholder ``None``."""

    def __init__(self) -> None:
        super().__init__()
        self.defaulted: set[str] = set()

    def __missing__(self, key):
        if key in __builtins__ if isinstance(__builtins__, dict) else hasattr(__builtins__, key):
            raise KeyError(key)
        self.defaulted.add(key)
        return None


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_check_cells_on_placeholders_print_not_answered_and_no_value(page):
    text = page.read_text()
    imports = ast.Module(
        [n for c in cells(text) for n in ast.parse(c).body if isinstance(n, ast.ImportFrom) and _ours(n)],
        [],
    )
    for before, _ in exercises(text):
        ns = Placeholders()
        exec(compile(imports, page.name, "exec"), ns)  # noqa: S102 - the page's own imports
        code = cells(before)
        for cell in code:
            if not CHECK.search(cell):
                with contextlib.suppress(Exception), contextlib.redirect_stdout(io.StringIO()):
                    exec(compile(cell, page.name, "exec"), ns)  # noqa: S102 - the placeholders
        for cell in (c for c in code if CHECK.search(c)):
            out = io.StringIO()
            try:
                with contextlib.redirect_stdout(out):
                    exec(compile(cell, page.name, "exec"), ns)  # noqa: S102 - the check, as the build runs it
            except (TypeError, AttributeError):
                if ns.defaulted:  # the page's data computed before the exercise is missing here
                    continue
                raise
            said = out.getvalue()
            lines = said.splitlines()
            assert lines and all(line.startswith("not answered yet") for line in lines), (
                f"{page.name}: {cell!r} printed {said!r}"
            )


def test_pages_state_the_checkers_world_sizes():
    """The pages name the world sizes check_collective tries; they must be its defaults."""
    import inspect

    from mycollectives.book.exercises import check_collective

    sizes = inspect.signature(check_collective).parameters["world_sizes"].default
    said = ", ".join(map(str, sizes[:-1])) + f" and {sizes[-1]}"
    for name in ("02_primitives.md", "03_algorithms.md"):
        text = " ".join((ROOT / "chapters" / name).read_text().split())
        assert said in text, f"{name} does not state check_collective's world sizes ({said})"
        assert "1 to 8" not in text, name
