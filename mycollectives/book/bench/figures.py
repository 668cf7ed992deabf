"""The benchmark pages' figures of the model against measurement (the benchmarks
page, chapter 3b): predicted against measured time, and one panel per algorithm
of measured times against each model's line. The bench's own figure (busbw
against size) is :mod:`mycollectives.bench.plot`'s."""

from __future__ import annotations


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
