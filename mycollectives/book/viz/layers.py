"""The package's import graph, drawn by layer (appendix "The package").

One box per part of the package (``algorithms``, ``transport``, ``cost``, ...:
the first name below ``mycollectives``), placed at the height of its layer
(:data:`mycollectives.book.layers.LAYERS`), and one arrow per pair of parts one
imports from the other. Every arrow points down or sideways within a layer;
an upward one would be a violation that the tests refuse.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..layers import LAYERS, import_graph, layer_of

if TYPE_CHECKING:
    from matplotlib.axes import Axes


def part_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "mycollectives"


def part_edges(graph: dict[str, set[str]] | None = None) -> set[tuple[str, str]]:
    """``(importer, imported)`` pairs of parts, from the module graph."""
    graph = import_graph() if graph is None else graph
    return {
        (part_of(a), part_of(b)) for a, targets in graph.items() for b in targets if part_of(a) != part_of(b)
    }


def _layer(part: str) -> int:
    return layer_of("mycollectives" if part == "mycollectives" else f"mycollectives.{part}")


def draw_imports(ax: Axes | None = None) -> Axes:
    """The parts of the package by layer (bottom: ``base``), with their imports as arrows."""
    import matplotlib.pyplot as plt

    graph = import_graph()
    parts = sorted({part_of(m) for m in graph})
    where = {}
    for i in range(len(LAYERS)):
        row = [p for p in parts if _layer(p) == i]
        for j, p in enumerate(row):
            where[p] = ((j + 0.5) / len(row), i)
    ax = ax or plt.subplots(figsize=(9, 6.5))[1]
    for a, b in sorted(part_edges(graph)):
        (x0, y0), (x1, y1) = where[a], where[b]
        ax.annotate(
            "", (x1, y1 + 0.18), (x0, y0 - 0.18), arrowprops=dict(arrowstyle="->", color="0.55", lw=0.7)
        )
    for p, (x, y) in where.items():
        ax.text(
            x, y, p, ha="center", va="center", fontsize=9, bbox=dict(boxstyle="round", fc="white", ec="0.3")
        )
    ax.set_yticks(range(len(LAYERS)), [name for name, _ in LAYERS], fontsize=9)
    ax.set_xticks([])
    ax.set_xlim(0, 1)
    ax.set_ylim(-0.6, len(LAYERS) - 0.4)
    for spine in ("top", "right", "bottom"):
        ax.spines[spine].set_visible(False)
    ax.set_title("mycollectives: parts by layer, arrows from importer to imported", fontsize=10)
    return ax
