"""The build's record of what each cell sets (``mycollectives.book.answers``), which the
hidden-answer test reads instead of executing the pages again."""

from __future__ import annotations

import json

import pytest

from mycollectives.book import answers

IPython = pytest.importorskip("IPython", reason="needs IPython (pip install -e .[book])")


def test_a_kernel_records_the_numbers_each_cell_creates_or_changes(tmp_path):
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        answers.install(tmp_path)
        cells = [
            "t_4mib = None",
            "t_4mib = 1.25e-3\nn = 7\nflag = True",
            "n = 7",
            "n = 8\nbad = float('nan')",
        ]
        for code in cells:
            shell.run_cell(code)
        got = answers.read(tmp_path, ["", *cells])  # an empty cell is not executed, and sets nothing
    finally:
        InteractiveShell.clear_instance()
    assert got == [{}, {}, {"t_4mib": 1.25e-3, "n": 7}, {}, {"n": 8}]


def test_a_record_of_other_cells_is_not_read(tmp_path):
    record = [{"source": answers.source_key("x = 2.5"), "set": {"x": 2.5}}]
    (tmp_path / "1-1.json").write_text(json.dumps(record))
    assert answers.read(tmp_path, ["x = 2.5"]) == [{"x": 2.5}]
    assert answers.read(tmp_path, ["x = 2.5", "y = 1"]) is None  # the page has changed since
    assert answers.read(tmp_path, ["x = 2.6"]) is None
