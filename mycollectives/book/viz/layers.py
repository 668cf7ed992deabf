"""The package's import graph, drawn by layer (appendix "The package").

One row and one column per part of the package (``algorithms``, ``transport``,
``cost``, ...: the first name below ``mycollectives``), both ordered from the top
layer down (:data:`mycollectives.book.layers.LAYERS`), and a mark where the
row's part imports the column's. A layer may import its own block (the boxes
on the diagonal) and the layers after it, to the right; the grey cells, a
layer above, must stay empty, and the tests refuse a mark there.
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
    """The parts' imports as a matrix, rows importing columns, both from the top layer down."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    graph = import_graph()
    parts = sorted({part_of(m) for m in graph}, key=lambda p: (-_layer(p), p))
    at = {p: i for i, p in enumerate(parts)}
    n = len(parts)
    ax = ax or plt.subplots(figsize=(9, 9))[1]
    blocks: dict[int, list[int]] = {}
    for i, p in enumerate(parts):
        blocks.setdefault(_layer(p), [i, i])[1] = i
    for layer, (a, b) in blocks.items():
        if a:  # a layer above: forbidden
            ax.add_patch(Rectangle((-0.5, a - 0.5), a, b - a + 1, color="0.88", lw=0))
        ax.add_patch(Rectangle((a - 0.5, a - 0.5), b - a + 1, b - a + 1, fill=False, ec="0.35", lw=0.8))
        ax.text(n, (a + b) / 2, LAYERS[layer][0], va="center", fontsize=9)
    rows, cols = zip(*sorted((at[a], at[b]) for a, b in part_edges(graph)))
    ax.scatter(cols, rows, s=22, marker="s", color="C0")
    ax.set_xticks(range(n), parts, rotation=90, fontsize=9)
    ax.set_yticks(range(n), parts, fontsize=9)
    ax.set_xlim(-0.5, n - 0.5)
    ax.set_ylim(n - 0.5, -0.5)
    ax.set(xlabel="imported part", ylabel="importing part")
    ax.set_title("mycollectives: which part imports which (grey: a layer above, empty)", fontsize=10)
    return ax
