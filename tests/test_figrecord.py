"""Every PNG a notebook writes records its smallest font (mycollectives.book.figrecord):
the record is what matplotlib drew, survives savefig, and is absent where it was not made."""

from __future__ import annotations

import io

import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from mycollectives.book import figrecord  # noqa: E402


def _png(fig, **kwargs) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", **kwargs)
    return buf.getvalue()


def test_the_smallest_drawn_text_counts_and_hidden_text_does_not():
    fig, (a, b) = plt.subplots(1, 2, figsize=(6, 3))
    a.plot([0, 1], label="x")
    a.legend(fontsize=7)
    a.tick_params(labelsize=9)
    b.tick_params(labelsize=3)  # tiny tick labels on an axes that is then hidden
    b.set_axis_off()
    b.text(0.5, 0.5, "", fontsize=2)  # empty text draws nothing
    assert figrecord.smallest_font_pt(fig) == 7
    b.set_axis_on()
    assert figrecord.smallest_font_pt(fig) == 3
    plt.close(fig)
    empty = plt.figure()
    assert figrecord.smallest_font_pt(empty) is None
    plt.close(empty)


def test_install_records_every_png_and_undo_removes_it():
    fig, ax = plt.subplots(figsize=(4, 2), dpi=80)
    ax.set_title("title", fontsize=12)
    ax.tick_params(labelsize=6.5)
    assert figrecord.read_record(_png(fig)) is None  # not installed: no record
    undo = figrecord.install()
    try:
        assert figrecord.install()() is None  # installing twice is harmless, its undo a no-op
        rec = figrecord.read_record(_png(fig, bbox_inches="tight", dpi=150, metadata={"Title": "t"}))
        assert rec == {"min_font_pt": 6.5, "dpi": 150.0}  # savefig's dpi, not the figure's
        assert figrecord.read_record(_png(fig)) == {"min_font_pt": 6.5, "dpi": 80.0}
    finally:
        undo()
    assert figrecord.read_record(_png(fig)) is None
    plt.close(fig)


def test_outside_a_kernel_nothing_is_installed():
    figrecord.install_in_notebook()  # pytest is no IPython kernel
    fig = plt.figure()
    fig.text(0.5, 0.5, "x")
    assert figrecord.read_record(_png(fig)) is None
    plt.close(fig)


def test_read_record_wants_a_png():
    assert figrecord.read_record(b"GIF89a...") is None


def test_importing_the_package_installs_no_hook():
    """The book opts in (its IPython startup file); the package's import never reaches figrecord."""
    from mycollectives.book.layers import import_graph

    graph, seen, todo = import_graph(), set(), ["mycollectives"]
    while todo:  # what importing the package imports at all (top level or in functions alike)
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo += graph.get(m, ())
    assert "mycollectives.book.figrecord" not in seen
