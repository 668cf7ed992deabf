"""Plots of simulated runs: link-utilisation heatmaps and busbw against size (chapter 4)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..sim import SimResult

if TYPE_CHECKING:
    from matplotlib.axes import Axes


def link_heatmap(result: SimResult, ax: Axes | None = None, max_links: int = 64) -> Axes:
    """Rounds across, links down, colour = fraction of the link's bandwidth used.

    Only links that carried traffic are shown (the busiest ``max_links``).
    """
    import matplotlib.pyplot as plt

    util = result.round_utilisation()
    if util is None:
        raise ValueError("this result kept no per-round link traffic (simulate with record_links=True)")
    used = np.flatnonzero(result.link_bytes > 0)
    used = used[np.argsort(-result.link_bytes[used], kind="stable")[:max_links]]
    used.sort()
    topo = result.topology
    ax = ax or plt.subplots(figsize=(9, 0.18 * len(used) + 2))[1]
    im = ax.imshow(util[:, used].T, aspect="auto", cmap="viridis", vmin=0, vmax=1, interpolation="nearest")
    names = [f"{topo.names[topo.link_src[k]]}->{topo.names[topo.link_dst[k]]}" for k in used]
    ax.set_yticks(range(len(used)), names, fontsize=6)
    ax.set_xlabel("round")
    ax.set_title(f"{result.algorithm} on {topo.name}: link utilisation")
    plt.colorbar(im, ax=ax, label="fraction of bandwidth")
    return ax


def best_changes(results: dict[str, list[SimResult]]) -> list[tuple[int, str, str]]:
    """Sizes where the fastest algorithm changes: ``(size, was, becomes)``."""
    names = list(results)
    sizes = [r.nbytes for r in results[names[0]]]
    best = [min(names, key=lambda a: results[a][i].time_s) for i in range(len(sizes))]
    return [(sizes[i], best[i - 1], best[i]) for i in range(1, len(sizes)) if best[i] != best[i - 1]]


def busbw_plot(
    results: dict[str, list[SimResult]], ax: Axes | None = None, measured: dict | None = None
) -> Axes:
    """busbw against message size, one line per algorithm, crossovers marked.

    ``results`` is what :func:`mycollectives.sim.sweep` returns; ``measured``
    optionally maps a label to ``(sizes, busbw)`` points to overlay.
    """
    import matplotlib.pyplot as plt

    ax = ax or plt.subplots(figsize=(8, 4.5))[1]
    for name, rs in results.items():
        ax.plot([r.nbytes for r in rs], [r.busbw for r in rs], marker=".", label=name)
    for label, (x, y) in (measured or {}).items():
        ax.plot(x, y, "k+", label=label)
    for size, was, now in best_changes(results):
        ax.axvline(size, color="0.5", ls="--", lw=0.8)
        ax.annotate(
            f"{was} -> {now}", (size, ax.get_ylim()[1]), rotation=90, va="top", ha="right", fontsize=7
        )
    ax.set_xscale("log", base=2)
    ax.set_xlabel("size (bytes)")
    ax.set_ylabel("busbw (GB/s)")
    first = next(iter(results.values()))[0]
    ax.set_title(f"{first.collective} on {first.topology.name}")
    ax.legend(fontsize=8)
    return ax
