"""Figures of the step-time calculator, and its ipywidgets panel for live notebooks (chapter 5).

:func:`plot_steps` draws one horizontal bar per report: compute, then each
strategy's exposed communication, then the pipeline bubble; hidden
communication is drawn as a hatched bar below, for scale.
:func:`plot_link_bytes` draws the bytes a GPU sends per step over NVLink
and over the network, per strategy. :func:`panel` returns sliders over a
layout that redraw both; :func:`has_frontend` says whether a notebook
front-end is there to show it (the book's headless build has none, and
shows the static figures instead).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from ...steptime.config import ModelConfig
from ...steptime.layout import Layout
from ...steptime.step import StepReport, step_time

COLOURS = {
    "TP": "tab:red",
    "SP": "tab:orange",
    "CP": "tab:purple",
    "EP": "tab:brown",
    "PP": "tab:pink",
    "DP": "tab:blue",
    "ZeRO": "tab:blue",
    "FSDP": "tab:cyan",
    "HSDP": "tab:olive",
}


def _colour(strategy: str) -> str:
    return COLOURS.get(strategy.split()[0], "tab:gray")


def plot_steps(reports: Sequence[StepReport], ax=None, labels: Sequence[str] | None = None):
    """Stacked bars of step time (seconds), one per report."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(7.4, 1.6 + 0.7 * len(reports)))  # a book column
    labels = labels or [f"{r.model.name}, " + r.layout.describe().replace(", ", "\n", 1) for r in reports]
    seen: set[str] = set()
    for i, r in enumerate(reports):
        y = len(reports) - 1 - i
        left = 0.0

        def bar(width, colour, label, hatch=None, yy=y, height=0.5):
            nonlocal left
            show = label not in seen
            seen.add(label)
            ax.barh(
                yy,
                width,
                left=left,
                height=height,
                color=colour,
                hatch=hatch,
                edgecolor="dimgray" if colour == "white" else "white",
                label=label if show else None,
            )
            left += width

        bar(r.compute, "tab:green", "compute")
        for name, d in r.by_strategy().items():
            if d["exposed"] > 0:
                bar(d["exposed"], _colour(name), f"{name} (exposed)")
        if r.bubble > 0:
            bar(r.bubble, "lightgray", "pipeline bubble", hatch="//")
        hidden = sum(row.hidden for row in r.rows)
        if hidden > 0:
            left = 0.0
            bar(hidden, "white", "communication hidden by overlap", hatch="xx", yy=y - 0.38, height=0.18)
        ax.annotate(
            f"{r.step:.2f} s, {r.verdict()}",
            (r.step, y),
            xytext=(4, 0),
            textcoords="offset points",
            va="center",
            fontsize=9,
        )
    ax.set_yticks(range(len(reports)), labels[::-1], fontsize=9)
    ax.set_xlabel("seconds per training step")
    ax.legend(fontsize=9, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=3)  # below the axis label
    room = 1.25 if all(r.fits for r in reports) else 1.6  # for "does not fit: ... GB of 80"
    ax.set_xlim(0, max(r.step for r in reports) * room)
    return ax


def log_ticks(ax, values: Sequence[float], axis: str = "x") -> None:
    """A log axis labelled at ``values`` as plain numbers (no ``3x10^0``), without minor ticks.

    Labels that would touch are thinned: each is kept only if it sits at
    least a fifth of a decade from the last one kept.
    """
    import math

    from matplotlib.ticker import NullLocator

    kept: list[float] = []
    for v in sorted(set(values)):
        if not kept or math.log10(v / kept[-1]) >= 0.2:
            kept.append(v)
    getattr(ax, f"set_{axis}scale")("log")
    getattr(ax, f"set_{axis}ticks")(kept, [f"{v:g}" for v in kept])
    getattr(ax, f"{axis}axis").set_minor_locator(NullLocator())


def plot_link_bytes(report: StepReport, ax=None):
    """Gigabytes one GPU sends per step, per strategy, over NVLink and over the network."""
    import matplotlib.pyplot as plt
    import numpy as np

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3))
    d = report.by_strategy()
    names = list(d)
    x = np.arange(len(names))
    ax.bar(x - 0.2, [d[n]["nvlink"] / 1e9 for n in names], 0.4, label="NVLink", color="tab:green")
    ax.bar(x + 0.2, [d[n]["network"] / 1e9 for n in names], 0.4, label="network", color="tab:orange")
    ax.set_xticks(x, names)
    ax.set_ylabel("GB sent per GPU per step (log)")
    ax.set_yscale("log")
    ax.set_title(f"{report.model.name}, {report.layout.describe()}", fontsize=9)
    ax.legend(fontsize=8)
    return ax


def has_frontend() -> bool:
    """True in a live notebook with a front-end that can show widgets.

    ``MYCOLLECTIVES_WIDGETS=1`` or ``0`` decides outright; otherwise a kernel
    started by a Jupyter server (which sets ``JPY_SESSION_NAME``) or by VS
    Code counts as having one, and a headless executor (the book's build,
    nbval) does not.
    """
    forced = os.environ.get("MYCOLLECTIVES_WIDGETS")
    if forced in ("0", "1"):
        return forced == "1"
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    if shell is None or not hasattr(shell, "kernel"):
        return False
    return "JPY_SESSION_NAME" in os.environ or "VSCODE_PID" in os.environ


def panel(model: ModelConfig, topology, gpus: int, layout: Layout | None = None, **kwargs):
    """Sliders for a layout of ``gpus`` GPUs (tp, cp, pp, ep, ZeRO stage, sequence parallelism,
    micro-batches; dp is what remains) that redraw the step and its table."""
    import ipywidgets as widgets
    import matplotlib.pyplot as plt

    start = layout or Layout(dp=gpus)
    powers = [2**i for i in range(0, 8)]
    sliders = {
        "tp": widgets.SelectionSlider(options=powers[:5], value=start.tp, description="tp"),
        "cp": widgets.SelectionSlider(options=powers[:6], value=start.cp, description="cp"),
        "pp": widgets.SelectionSlider(options=powers[:6], value=start.pp, description="pp"),
        "ep": widgets.SelectionSlider(options=powers[:7], value=start.ep, description="ep"),
        "zero": widgets.IntSlider(value=start.zero, min=0, max=3, description="ZeRO"),
        "microbatches": widgets.SelectionSlider(
            options=powers, value=start.microbatches, description="micro-batches"
        ),
        "sp": widgets.Checkbox(value=start.sp, description="sequence parallel"),
    }
    out = widgets.Output()

    def redraw(_=None):
        v = {k: s.value for k, s in sliders.items()}
        with out:
            out.clear_output(wait=True)
            rest = gpus // (v["tp"] * v["cp"] * v["pp"])
            try:
                if rest * v["tp"] * v["cp"] * v["pp"] != gpus:
                    raise ValueError(
                        f"tp x cp x pp = {v['tp'] * v['cp'] * v['pp']} does not divide {gpus} GPUs"
                    )
                lay = Layout(
                    tp=v["tp"],
                    sp=v["sp"] and v["tp"] > 1,
                    cp=v["cp"],
                    pp=v["pp"],
                    dp=rest,
                    ep=v["ep"],
                    zero=v["zero"],
                    microbatches=v["microbatches"],
                    micro_batch=start.micro_batch,
                    recompute=start.recompute,
                )
                report = step_time(model, lay, topology, **kwargs)
            except ValueError as e:
                print(e)
                return
            fig, axes = plt.subplots(1, 2, figsize=(12, 3.2), gridspec_kw=dict(width_ratios=[2, 1]))
            plot_steps([report], ax=axes[0], labels=[lay.describe()])
            plot_link_bytes(report, ax=axes[1])
            fig.tight_layout()
            plt.show()
            print(report.table())

    for s in sliders.values():
        s.observe(redraw, names="value")
    redraw()
    return widgets.VBox(
        [widgets.HBox(list(sliders.values())[:4]), widgets.HBox(list(sliders.values())[4:]), out]
    )
