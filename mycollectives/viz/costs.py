"""Figures of the cost model (chapters 2, 3 and 3b).

* :func:`message_times`: ``t(n) = alpha + beta n`` of some links, with each
  term and the half-bandwidth size marked (chapter 2);
* :func:`pingpong_fit`: a ping-pong calibration's points and fitted line;
* :func:`time_per_byte`: the modelled time per byte of several algorithms
  against size, where the fastest changes marked (chapter 3b's crossovers);
* :func:`choice_map`: the algorithm the model picks for every world size and
  size, the picture of a tuner's table (chapter 3b).

They draw what :mod:`mycollectives.cost` computes; nothing here is measured.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..cost import Calibration, Machine, cheapest, predict

if TYPE_CHECKING:
    from matplotlib.axes import Axes


def _axes(ax, figsize):
    import matplotlib.pyplot as plt

    return ax or plt.subplots(figsize=figsize)[1]


def size_label(n: float) -> str:
    """``64 B``, ``16 KiB``, ``4 MiB``, ``1 GiB``: a size in bytes in its largest whole unit."""
    for unit, k in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << k:
            return f"{n / (1 << k):g} {unit}"
    return f"{n:g} B"


def message_times(links: Sequence, ax: Axes | None = None) -> Axes:
    """``alpha + beta n`` for each link (objects with ``name``, ``alpha``, ``beta``,
    ``half_bandwidth_bytes``): dotted the alpha term, dashed the beta term."""
    ax = _axes(ax, (6.5, 3.8))
    n = np.logspace(8, 31, 200, base=2)
    for link, colour in zip(links, ("tab:green", "tab:orange", "tab:blue", "tab:purple")):
        ax.loglog(n, (link.alpha + n * link.beta) * 1e6, color=colour, label=link.name)
        ax.loglog(n, np.full_like(n, link.alpha * 1e6), ":", color=colour, lw=0.8)
        ax.loglog(n, n * link.beta * 1e6, "--", color=colour, lw=0.8)
        ax.axvline(link.half_bandwidth_bytes, color=colour, lw=0.6)
        ax.annotate("$n_{1/2}$", (link.half_bandwidth_bytes, 2e4), color=colour, fontsize=9, ha="right")
    ax.set(xlabel="message size (bytes)", ylabel="time (µs)", ylim=(1, 3e4))
    ax.set_title("t(n) = alpha + beta n: dotted alpha, dashed beta n", fontsize=10)
    ax.legend(fontsize=9)
    return ax


def pingpong_fit(cal: Calibration, ax: Axes | None = None, title: str = "") -> Axes:
    """A calibration's one-way times against size, its fitted line and ``n_1/2``."""
    ax = _axes(ax, (6.5, 3.8))
    m = cal.machine
    ax.loglog(cal.sizes, cal.times * 1e6, "o", label="measured (half a round trip)")
    fine = np.logspace(np.log2(cal.sizes[0]), np.log2(cal.sizes[-1]), 100, base=2)
    fit = f"fit: {m.alpha * 1e6:.0f} us + n / {1 / m.beta / 1e9:.1f} GB/s"
    ax.loglog(fine, (m.alpha + m.beta * fine) * 1e6, "-", label=fit)
    ax.axvline(m.alpha / m.beta, color="0.5", ls="--", lw=0.8)
    ax.annotate("$n_{1/2}$", (m.alpha / m.beta, ax.get_ylim()[1]), ha="right", va="top", fontsize=9)
    ax.set(xlabel="message size (bytes)", ylabel="one-way time (µs)")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=9)
    return ax


def time_per_byte(
    collective: str,
    world_size: int,
    sizes: Sequence[int],
    machine: Machine,
    candidates: Sequence[str],
    ax: Axes | None = None,
) -> Axes:
    """Modelled seconds per byte of each candidate against size (flat: bandwidth-bound);
    a dashed line where the fastest changes, labelled with the algorithm that takes over."""
    ax = _axes(ax, (7, 3.6))
    times: dict[str, list[float]] = {a: [] for a in candidates}
    for n in sizes:
        for a, t in predict(collective, world_size, n, machine, candidates=tuple(candidates)).items():
            times[a].append(t)
    for a, t in times.items():
        ax.loglog(sizes, np.array(t) / np.array(sizes), label=a)
    best = [min(times, key=lambda a: times[a][i]) for i in range(len(sizes))]
    for i in range(1, len(sizes)):
        if best[i] != best[i - 1]:
            ax.axvline(sizes[i], color="0.5", ls="--", lw=0.8)
            ax.annotate(best[i], (sizes[i], 0.97), xycoords=("data", "axes fraction"), rotation=90,
                        va="top", ha="right", fontsize=9)  # fmt: skip
    ax.set_xscale("log", base=2)
    ax.set_xlabel("size (bytes)")
    ax.set_ylabel("modelled s per byte")
    ax.set_title(f"{collective}, p = {world_size}", fontsize=10)
    ax.legend(fontsize=9)
    return ax


def choice_map(
    collective: str,
    world_sizes: Sequence[int],
    sizes: Sequence[int],
    machine: Machine,
    ax: Axes | None = None,
) -> Axes:
    """The model's cheapest algorithm for every world size (rows) and size
    (columns), one colour per algorithm: a tuner's table as a picture."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    ax = _axes(ax, (7, 3.2))
    picks = [[cheapest(collective, p, n, machine) for n in sizes] for p in world_sizes]
    names = list(dict.fromkeys(a for row in picks for a in row))
    colours = plt.get_cmap("tab10").colors
    grid = np.array([[colours[names.index(a)] for a in row] for row in picks])
    ax.imshow(grid, aspect="auto", interpolation="nearest")
    step = max(1, len(sizes) // 8)
    ax.set_xticks(range(0, len(sizes), step), [size_label(n) for n in sizes[::step]], fontsize=9)
    ax.set_yticks(range(len(world_sizes)), [str(p) for p in world_sizes], fontsize=9)
    ax.set_xlabel("size")
    ax.set_ylabel("ranks")
    ax.set_title(f"{collective}: the model's choice", fontsize=10)
    ax.legend(
        handles=[Patch(color=colours[i], label=a) for i, a in enumerate(names)],
        fontsize=9, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False,
    )  # fmt: skip
    return ax
