"""The bench's figure of a sweep: busbw against size, one line per algorithm (the pages'
figures of the model against measurement are :mod:`mycollectives.book.bench.figures`)."""

from __future__ import annotations

from collections.abc import Sequence

from .runner import Result


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def busbw_axes(ax, results: Sequence[Result], title: str = "") -> None:
    """One line per algorithm (the native one dashed, in black)."""
    algs = list(dict.fromkeys(r.algorithm for r in results))
    for a in algs:
        pts = sorted((r.size, r.busbw) for r in results if r.algorithm == a)
        style = {"color": "black", "linestyle": "--", "linewidth": 2} if a == "native" else {}
        ax.plot([s for s, _ in pts], [b for _, b in pts], marker="o", label=a, **style)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("size (bytes)")
    ax.set_ylabel("busbw (GB/s)")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")


def plot_busbw(results: Sequence[Result], path: str | None = None, title: str = ""):
    """busbw against size; saved to ``path`` if given; returns the figure."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    busbw_axes(ax, results, title)
    fig.tight_layout()
    if path:
        fig.savefig(path, dpi=120)
    return fig
