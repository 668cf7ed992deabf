"""Plots of simulated runs: link-utilisation heatmaps and busbw against size (chapter 4)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..sim import SimResult

if TYPE_CHECKING:
    from matplotlib.axes import Axes


def link_heatmap(
    result: SimResult,
    ax: Axes | None = None,
    max_links: int = 64,
    sources: tuple[str, ...] | None = None,
    fontsize: float = 8,
) -> Axes:
    """Rounds across, links down, colour = fraction of the link's bandwidth used.

    Only links that carried traffic are shown (the busiest ``max_links``);
    ``sources`` keeps only links leaving vertices of those kinds (chapter 4
    shows ``("gpu",)``: each GPU's NVLink and its path to its NIC), grouped
    by where they lead.
    """
    import matplotlib.pyplot as plt

    util = result.round_utilisation()
    if util is None:
        raise ValueError("this result kept no per-round link traffic (simulate with record_links=True)")
    topo = result.topology
    used = np.flatnonzero(result.link_bytes > 0)
    if sources is not None:
        used = used[[topo.kinds[topo.link_src[k]] in sources for k in used]]
    used = used[np.argsort(-result.link_bytes[used], kind="stable")[:max_links]]
    used = np.array(
        sorted(used, key=lambda k: (topo.kinds[topo.link_dst[k]], topo.link_src[k], k)), dtype=int
    )
    ax = ax or plt.subplots(figsize=(7, 0.16 * len(used) + 1.4))[1]
    im = ax.imshow(util[:, used].T, aspect="auto", cmap="viridis", vmin=0, vmax=1, interpolation="nearest")
    names = [f"{topo.names[topo.link_src[k]]} -> {topo.names[topo.link_dst[k]]}" for k in used]
    ax.set_yticks(range(len(used)), names, fontsize=fontsize)
    ax.tick_params(axis="x", labelsize=fontsize)
    ax.set_xlabel("round", fontsize=fontsize + 1)
    ax.set_title(f"{result.algorithm} on {topo.name}: link utilisation", fontsize=fontsize + 2)
    bar = plt.colorbar(im, ax=ax)
    bar.set_label("fraction of bandwidth", fontsize=fontsize + 1)
    bar.ax.tick_params(labelsize=fontsize)
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


def hierarchy_plot(levels: list[tuple[str, float, str]], ax: Axes | None = None) -> Axes:
    """Horizontal bars, log scale: ``(label, bytes/s, kind)`` per level, coloured by kind
    (``memory``, ``NVLink``, ``PCIe``, ``network``); chapter 4's bandwidth hierarchy draws
    :func:`mycollectives.memory.h100_levels`."""
    import matplotlib.pyplot as plt

    colours = {"memory": "tab:gray", "NVLink": "tab:green", "PCIe": "tab:blue", "network": "tab:orange"}
    ax = ax or plt.subplots(figsize=(7, 3.6))[1]
    rows = levels[::-1]
    ax.barh([n for n, _, _ in rows], [b / 1e9 for _, b, _ in rows], color=[colours[k] for _, _, k in rows])
    for i, (_, b, _) in enumerate(rows):
        ax.annotate(
            f"{b / 1e9:.0f}", (b / 1e9, i), xytext=(3, 0), textcoords="offset points", va="center", fontsize=8
        )
    ax.set_xscale("log")
    ax.set_xlabel("GB/s per GPU, one direction (log scale)")
    ax.set_title("the bandwidth hierarchy seen from one GPU", fontsize=10)
    return ax


_STYLES = [  # one per set, in the order given: filled, hollow, then grey
    dict(marker="o", color="tab:blue"),
    dict(marker="o", mfc="none", color="tab:blue"),
    dict(marker="^", color="0.55"),
    dict(marker="s", color="tab:orange"),
]


def validation_plot(points: dict[str, list[tuple[float, float]]], ax: Axes | None = None) -> Axes:
    """Simulated against published busbw: log-log, with the 20 % band shaded, and (when ``ax`` is not
    given) beside it the ratio simulated / published on a linear axis with 5 % and 20 % bands, where a
    2 % error can be seen. ``points`` maps a set's name to ``(published, simulated)`` pairs (chapter 4,
    "Validation"); the sets take, in order, filled, hollow and grey markers."""
    import matplotlib.pyplot as plt

    ratio, lo, hi, beyond = None, 0.6, 1.5, 0
    if ax is None:
        ax, ratio = plt.subplots(1, 2, figsize=(8, 3.8), gridspec_kw=dict(width_ratios=[1, 1.2]))[1]
    for (name, pairs), style in zip(points.items(), _STYLES):
        pub, sim = np.array([a for a, _ in pairs]), np.array([b for _, b in pairs])
        ax.loglog(pub, sim, ls="none", ms=5, label=f"{name} ({len(pairs)})", **style)
        if ratio is not None:
            ratio.semilogx(pub, sim / pub, ls="none", ms=5, **style)
            beyond += int(np.sum((sim / pub < lo) | (sim / pub > hi)))
    line = np.array([10.0, 1500.0])
    ax.loglog(line, line, "k-", lw=0.8)
    ax.fill_between(line, line * 0.8, line * 1.2, color="0.85", label="within 20 %")
    ax.set(xlabel="published busbw (GB/s)", ylabel="simulated busbw (GB/s)")
    ax.set_title("the simulator against nccl-tests", fontsize=10)
    ax.legend(fontsize=8)
    if ratio is not None:
        ratio.axhspan(0.8, 1.2, color="0.92", label="within 20 %")
        ratio.axhspan(0.95, 1.05, color="0.80", label="within 5 %")
        ratio.axhline(1.0, color="k", lw=0.8)
        ratio.set(
            xlabel="published busbw (GB/s)", ylabel="simulated / published", xlim=(10, 1500), ylim=(lo, hi)
        )
        if beyond:
            ratio.text(12, hi * 0.97, f"{beyond} points beyond {lo}-{hi}, not shown", fontsize=8, va="top")
        ratio.set_title("the same points, as a ratio", fontsize=10)
        ratio.legend(fontsize=8, loc="lower right")
        plt.tight_layout()
    return ax


def expected_busbw_plot(
    expected: dict[str, list], node_counts: list[int], nic_limit: float | None = None, ax: Axes | None = None
) -> Axes:
    """The busbw NCCL should give against the number of nodes (chapter 4, "What busbw should a cluster give?").

    ``expected`` maps a label (a size) to one :class:`~mycollectives.sim.expect.Expectation`
    per entry of ``node_counts``; ``nic_limit`` (GB/s) draws what a node's NICs carry.
    """
    import matplotlib.pyplot as plt

    ax = ax or plt.subplots(figsize=(7, 3.6))[1]
    for (label, got), marker in zip(expected.items(), "os^v"):
        ax.semilogx(node_counts, [e.busbw for e in got], marker + "-", label=label)
    if nic_limit:
        ax.axhline(nic_limit, color="tab:orange", ls=":", lw=1, label=f"the NICs: {nic_limit:.0f} GB/s")
    ax.set(xlabel="nodes", ylabel="busbw (GB/s)", ylim=(0, None))
    ax.set_title("all-reduce: the busbw NCCL should give", fontsize=10)
    ax.legend(fontsize=8)
    return ax
