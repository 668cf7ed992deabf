"""Figures of a sweep: busbw against size, and predicted against measured."""

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


def model_axes(ax, points, title: str = "") -> None:
    """Predicted against measured time, log-log, with the diagonal and a 15 % band."""
    algs = list(dict.fromkeys(p.algorithm for p in points))
    for a in algs:
        ps = [p for p in points if p.algorithm == a]
        ax.scatter([p.measured_us for p in ps], [p.predicted_us for p in ps], label=a, s=18)
    vals = [v for p in points for v in (p.measured_us, p.predicted_us)]
    if vals:
        lo, hi = min(vals) / 1.5, max(vals) * 1.5
        ax.plot([lo, hi], [lo, hi], color="black", linewidth=1)
        ax.fill_between([lo, hi], [lo * 0.85, hi * 0.85], [lo * 1.15, hi * 1.15], color="grey", alpha=0.2)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("measured (us)")
    ax.set_ylabel("predicted (us)")
    ax.set_title(title)
    ax.legend(fontsize="small")


def time_lines(ax, points: dict, collective: str, title: str = "") -> None:
    """Measured time against size (points) and each model's prediction (one line
    style per model: solid, dotted, dashed) for every algorithm of ``collective``;
    ``points`` maps a model's name to its :class:`~.predicted.Point` list."""
    styles = ["-", ":", "--", "-."]
    first = next(iter(points.values()))
    algs = list(dict.fromkeys(q.algorithm for q in first if q.collective == collective))
    for i, a in enumerate(algs):
        mine = sorted(
            (q for q in first if q.collective == collective and q.algorithm == a), key=lambda q: q.size
        )
        ax.loglog([q.size for q in mine], [q.measured_us for q in mine], "o", color=f"C{i}", label=a)
        for style, pts in zip(styles, points.values()):
            line = sorted(
                (q for q in pts if q.collective == collective and q.algorithm == a), key=lambda q: q.size
            )
            ax.loglog([q.size for q in line], [q.predicted_us for q in line], style, color=f"C{i}", alpha=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("size (bytes)")
    ax.set_ylabel("time (us)")
    models = ", ".join(f"{name} {style}" for style, name in zip(("solid", "dotted", "dashed"), points))
    ax.set_title(title or f"{collective}: measured (points); models: {models}", fontsize=9)
    ax.legend(fontsize=9, ncol=2)


def time_panels(points: dict, collective: str, title: str = "", ncols: int = 3):
    """One panel per algorithm of ``collective``: its measured times (points)
    against each model's prediction (one colour and line style per model),
    on shared log axes; ``points`` maps a model's name to its
    :class:`~.predicted.Point` list. Returns the figure, title and legend on top."""
    import matplotlib.pyplot as plt  # the caller's backend (a page's inline one), not Agg
    from matplotlib.ticker import NullFormatter

    first = next(iter(points.values()))
    algs = list(dict.fromkeys(q.algorithm for q in first if q.collective == collective))
    rows = -(-len(algs) // ncols)
    height = 1.9 * rows + 1.2
    fig, axes = plt.subplots(rows, ncols, figsize=(7.5, height), sharex=True, sharey=True, squeeze=False)
    styles = ["-", ":", "--", "-."]

    def of(pts, a):
        return sorted(
            (q for q in pts if q.collective == collective and q.algorithm == a), key=lambda q: q.size
        )

    for ax, a in zip(axes.flat, algs):
        ax.loglog(
            [q.size for q in of(first, a)], [q.measured_us for q in of(first, a)], "o", color="black", ms=4
        )
        for i, pts in enumerate(points.values()):
            ax.loglog(
                [q.size for q in of(pts, a)], [q.predicted_us for q in of(pts, a)], styles[i], color=f"C{i}"
            )
        ax.set_xscale("log", base=2)
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_title(a, fontsize=10)
        ax.grid(True, which="major", alpha=0.3)
    for ax in axes.flat[len(algs) :]:
        ax.set_visible(False)
    for ax in axes[:, 0]:
        ax.set_ylabel("time (us)")
    for ax in axes[-1]:
        ax.set_xlabel("size (bytes)")
    labels = ["measured"] + [f"{name} (model)" for name in points]
    handles = [plt.Line2D([], [], marker="o", ls="", color="black", ms=4)]
    handles += [plt.Line2D([], [], ls=styles[i], color=f"C{i}") for i in range(len(points))]
    fig.suptitle(title, fontsize=10, y=1 - 0.1 / height, va="top")
    top = 1 - 0.4 / height  # the legend's top, under the title
    fig.legend(
        handles,
        labels,
        loc="upper center",
        ncol=len(labels),
        fontsize=10,
        frameon=False,
        bbox_to_anchor=(0.5, top),
    )
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.6 / height))
    return fig
