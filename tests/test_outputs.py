"""nbval over every page of the book, on the notebooks the strict build executed (``tests/outputs.py``).

``make test`` builds the book (every page executed once) and then runs this
file: each page's executed notebook must come from the page's current
source, with no cell that raised, and every cell tagged
``nbval-check-output`` must print its expected output
(``tests/expected_outputs/``), compared as nbval compares. Nothing is executed
again here. Without a built book the tests skip (in CI, ``CI=true``, they fail).
"""

from __future__ import annotations

import json
import re

import pytest

nbformat = pytest.importorskip("nbformat", reason="needs nbval's dependencies (pip install -e .[test])")
pytest.importorskip("jupytext", reason="needs the book's dependencies (pip install -e .[book])")
import outputs  # noqa: E402 - after the checks above

pytestmark = pytest.mark.built
PAGES = outputs.pages()


def test_every_notebook_page_of_the_book_is_checked():
    assert "intro.md" in PAGES
    for part in ("chapters/", "labs/", "appendix/"):
        assert any(p.startswith(part) for p in PAGES), part
    names = {
        p.relative_to(outputs.EXPECTED).with_suffix(".md").as_posix()
        for p in outputs.EXPECTED.rglob("*.json")
    }
    assert names <= set(PAGES), (
        f"expected outputs of pages the book no longer has: {sorted(names - set(PAGES))}"
    )


@pytest.mark.parametrize("page", PAGES)
def test_page_executed_and_its_checked_outputs_match(page, record_property):
    outputs.built_or_skip(page)
    result = outputs.check_page(page)
    record_property("nbval", json.dumps([page, result.cells, result.compared]))
    assert not result.failures, "\n".join(result.failures)


def _fake_page(tmp_path, monkeypatch, printed: str) -> str:
    """A one-page book in tmp_path whose tagged cell printed ``printed``; its expected outputs written."""
    page = "chapters/toy.md"
    (tmp_path / "chapters").mkdir()
    (tmp_path / page).write_text(
        "---\njupytext:\n  text_representation:\n    extension: .md\n    format_name: myst\n"
        "    format_version: 0.13\nkernelspec:\n  display_name: Python 3\n  language: python\n  name: python3\n---\n\n"
        "```{code-cell} ipython3\nx = 1\n```\n\n"
        "```{code-cell} ipython3\n:tags: [nbval-check-output]\nprint(f'virtual time {x}')\n```\n"
    )
    monkeypatch.setattr(outputs, "ROOT", tmp_path)
    monkeypatch.setattr(outputs, "EXECUTED", tmp_path / "_build" / "jupyter_execute")
    monkeypatch.setattr(outputs, "EXPECTED", tmp_path / "tests" / "expected_outputs")
    monkeypatch.setattr(outputs, "SANITIZE", outputs.SANITIZE)  # the book's own patterns
    _write_executed(page, printed)
    return page


def _write_executed(page: str, printed: str) -> None:
    cells = [
        nbformat.v4.new_code_cell("x = 1", execution_count=1),
        nbformat.v4.new_code_cell(
            "print(f'virtual time {x}')",
            execution_count=2,
            metadata={"tags": [outputs.TAG]},
            outputs=[nbformat.v4.new_output("stream", name="stdout", text=printed)],
        ),
    ]
    path = outputs.executed_path(page)
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)


def test_a_changed_number_fails_naming_the_page_and_the_cell(tmp_path, monkeypatch):
    page = _fake_page(tmp_path, monkeypatch, "virtual time 12.5 us on dgx_h100 x2 at 0x7f3a2b1c00\n")
    assert outputs.write_expected(page, outputs.read_executed(page)) == 1
    assert outputs.check_page(page).failures == []
    _write_executed(page, "virtual time 12.5 us on dgx_h100 x2 at 0x55aa00ff11\n")  # an address varies
    assert outputs.check_page(page).failures == []
    _write_executed(page, "virtual time 12.6 us on dgx_h100 x2 at 0x7f3a2b1c00\n")
    result = outputs.check_page(page)
    assert result.compared == 1 and len(result.failures) == 1
    assert result.failures[0].startswith("chapters/toy.md, code cell 2 (print(f'virtual time {x}')")
    assert "-virtual time 12.5 us" in result.failures[0] and "+virtual time 12.6 us" in result.failures[0]


def _a_checked_number() -> tuple[str, object, int, object]:
    """(page, executed notebook, code cell number, output) of the first checked output with a digit."""
    for page in PAGES:
        if outputs.executed_path(page).exists() and outputs.expected_path(page).exists():
            nb = outputs.read_executed(page)
            for number, cell in outputs.checked(nb):
                for out in cell.outputs:
                    if re.search(r"\d", out.get("text", "")):
                        return page, nb, number, out
    outputs.unavailable(
        "no checked output with a number in the last build's notebooks: run `make book` first"
    )


def test_a_changed_number_in_a_real_page_fails(tmp_path, monkeypatch):
    """The same, on a page of the book as the last build executed it: one digit of a checked cell changed."""
    page, nb, number, out = _a_checked_number()
    digit = re.search(r"\d", out.text)
    out.text = out.text[: digit.start()] + str((int(digit.group()) + 1) % 10) + out.text[digit.end() :]
    monkeypatch.setattr(outputs, "EXECUTED", tmp_path)
    path = outputs.executed_path(page)
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    failures = outputs.check_page(page).failures
    assert len(failures) == 1 and failures[0].startswith(f"{page}, code cell {number} ("), failures


def test_a_cell_that_raised_or_a_stale_build_fails(tmp_path, monkeypatch):
    page = _fake_page(tmp_path, monkeypatch, "virtual time 1\n")
    outputs.write_expected(page, outputs.read_executed(page))
    nb = outputs.read_executed(page)
    nb.cells[0].outputs = [nbformat.v4.new_output("error", ename="ValueError", evalue="bad", traceback=[])]
    nbformat.write(nb, outputs.executed_path(page))
    assert "chapters/toy.md, code cell 1 (x = 1): raised ValueError: bad" in outputs.check_page(page).failures
    (tmp_path / page).write_text((tmp_path / page).read_text().replace("x = 1", "x = 2"))
    (failure,) = outputs.check_page(page).failures
    assert "another version of the page (code cell 1 differs)" in failure


def test_make_expected_rewrites_from_the_build_and_refuses_a_failed_or_stale_one(
    tmp_path, monkeypatch, capsys
):
    page = _fake_page(tmp_path, monkeypatch, "virtual time 1 us\n")
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: chapters/toy\n")
    assert outputs.pages() == [page]
    assert outputs.main(["expected"]) == 0
    written = outputs.expected_path(page).read_text()
    assert '"virtual time 1 us"' in written and '"cell": 2' in written
    nb = outputs.read_executed(page)
    nb.cells[0].outputs = [
        nbformat.v4.new_output("error", ename="KeyboardInterrupt", evalue="", traceback=[])
    ]
    nb.cells[1].outputs[0].text = "virtual time 2 us\n"
    nbformat.write(nb, outputs.executed_path(page))
    assert outputs.main(["expected"]) == 1
    assert "code cell 1 (x = 1): raised KeyboardInterrupt" in capsys.readouterr().err
    assert outputs.expected_path(page).read_text() == written  # nothing written
