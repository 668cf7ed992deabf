"""Space-time diagrams: ranks down the side, time across, one arrow per transfer (chapter 3).

The same drawing serves a schedule (time = round number, or the simulator's
round times), a simulation, or the trace a local world records while it runs
(``LocalWorld.trace``: measured send and receive times). :func:`draw_tree`
draws a tree given by each rank's parent (chapter 3's binary trees).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..schedule import Round, Schedule

if TYPE_CHECKING:
    from matplotlib.axes import Axes


def _arrows(ax, t0, t1, src, dst, reduce, p: int):
    from matplotlib.collections import LineCollection

    colours = np.where(np.asarray(reduce, bool)[:, None], [[0.84, 0.15, 0.16]], [[0.12, 0.47, 0.71]])
    segs = np.stack([np.stack([t0, src], 1), np.stack([t1, dst], 1)], 1)
    ax.add_collection(LineCollection(segs, colors=colours, linewidths=1.2))
    if len(segs) <= 2000:  # arrow heads, when there are few enough to see
        for a, b, c, d, col in zip(t0, src, t1, dst, colours):
            ax.annotate(
                "",
                (c, d),
                (a + 0.9 * (c - a), b + 0.9 * (d - b)),
                arrowprops=dict(arrowstyle="->", color=col),
            )
    ax.set_ylim(p - 0.5, -0.5)
    ax.set_yticks(range(p) if p <= 32 else np.linspace(0, p - 1, 9).astype(int))
    ax.set_ylabel("rank")


def spacetime(
    schedule: Schedule,
    ax: Axes | None = None,
    round_times: Sequence[float] | None = None,
    select: Callable[[Round], np.ndarray] | None = None,
) -> Axes:
    """Space-time diagram of a schedule: one arrow per remote transfer.

    Round ``k`` spans ``[k, k+1)`` unless ``round_times`` (seconds, e.g.
    ``SimResult.round_time``) gives each round's duration. Red arrows reduce,
    blue ones copy. ``select`` (a round's transfers to a boolean mask) draws
    only part of the schedule, e.g. one tree of a double binary tree, on the
    whole schedule's time axis. Returns the axes; ``ax.collections[0]`` holds
    the arrows.
    """
    import matplotlib.pyplot as plt

    p = schedule.world_size
    dur = np.ones(len(schedule.rounds)) if round_times is None else np.asarray(round_times, float)
    start = np.concatenate([[0.0], np.cumsum(dur)])
    cols = {k: [] for k in ("t0", "t1", "src", "dst", "reduce")}
    for k, r in enumerate(schedule.rounds):
        remote = (r.src != r.dst) & (True if select is None else np.asarray(select(r), bool))
        cols["t0"].append(np.full(remote.sum(), start[k]))
        cols["t1"].append(np.full(remote.sum(), start[k + 1]))
        for c in ("src", "dst", "reduce"):
            cols[c].append(getattr(r, c)[remote])
    cols = {k: np.concatenate(v) if v else np.zeros(0) for k, v in cols.items()}
    ax = ax or plt.subplots(figsize=(8, 0.35 * min(p, 32) + 1.5))[1]
    _arrows(ax, cols["t0"], cols["t1"], cols["src"], cols["dst"], cols["reduce"], p)
    for x in start:
        ax.axvline(x, color="0.85", lw=0.5, zorder=0)
    ax.set_xlim(0, start[-1] if len(start) > 1 else 1)
    ax.set_xlabel("round" if round_times is None else "time (s)")
    ax.set_title(f"{schedule.collective}/{schedule.algorithm}, p={p}")
    return ax


def spacetime_trace(trace, ax: Axes | None = None, collective: str | None = None) -> Axes:
    """Space-time diagram of a local world's trace (``LocalWorld.trace``), in measured time."""
    import matplotlib.pyplot as plt

    events = [e for e in trace if collective is None or e.collective == collective]
    if not events:
        raise ValueError("no trace events to draw")
    t_origin = min(e.t_send for e in events)
    t0 = np.array([e.t_send - t_origin for e in events]) * 1e3
    t1 = np.array([(e.t_recv if e.t_recv is not None else e.t_send) - t_origin for e in events]) * 1e3
    src = np.array([e.src for e in events])
    dst = np.array([e.dst for e in events])
    p = int(max(src.max(), dst.max())) + 1
    ax = ax or plt.subplots(figsize=(8, 0.35 * min(p, 32) + 1.5))[1]
    _arrows(ax, t0, t1, src, dst, np.zeros(len(events), bool), p)
    ax.set_xlim(0, max(t1.max(), 1e-6))
    ax.set_xlabel("time (ms)")
    ax.set_title(f"trace: {events[0].collective}/{events[0].algorithm}, {len(events)} messages")
    return ax


def message_lanes(trace, ax: Axes | None = None, collective: str | None = None) -> Axes:
    """A local world's trace as lanes: one lane per sender and receiver pair, one
    bar per message from its send to its receive (measured ms), coloured by round.

    Where :func:`spacetime_trace` crosses arrows, this shows how long each
    message waited and in which order a pair's messages went. Returns the axes;
    ``ax.containers`` holds one bar container per round.
    """
    import matplotlib.pyplot as plt

    events = [e for e in trace if collective is None or e.collective == collective]
    if not events:
        raise ValueError("no trace events to draw")
    t_origin = min(e.t_send for e in events)
    pairs = sorted({(e.src, e.dst) for e in events})
    rounds = sorted({e.round for e in events})
    rows = {}  # (pair, round) -> row; a pair's messages in round order
    for pair in pairs:
        mine = sorted({e.round for e in events if (e.src, e.dst) == pair})
        for k in mine:
            rows[pair, k] = len(rows)
    ax = ax or plt.subplots(figsize=(7.5, 0.16 * len(rows) + 1.6))[1]
    colours = plt.get_cmap("viridis")(np.linspace(0, 0.9, len(rounds)))
    for colour, k in zip(colours, rounds):
        mine = [e for e in events if e.round == k]
        t0 = np.array([e.t_send - t_origin for e in mine]) * 1e3
        t1 = np.array([(e.t_recv if e.t_recv is not None else e.t_send) - t_origin for e in mine]) * 1e3
        y = [rows[(e.src, e.dst), k] for e in mine]
        ax.barh(y, np.maximum(t1 - t0, 1e-3), left=t0, height=0.8, color=colour, label=f"round {k}")
    starts = [min(v for (pr, _), v in rows.items() if pr == pair) for pair in pairs]
    ends = starts[1:] + [len(rows)]
    for edge in starts[1:]:
        ax.axhline(edge - 0.5, color="0.7", lw=0.6)
    ax.set_yticks([(a + b - 1) / 2 for a, b in zip(starts, ends)], [f"{s} \u2192 {d}" for s, d in pairs])
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_ylabel("sender \u2192 receiver")
    ax.set_xlabel("time (ms): each bar from send to receive")
    ax.set_title(f"trace: {events[0].collective}/{events[0].algorithm}, {len(events)} messages")
    return ax


def draw_tree(parent, ax: Axes | None = None, title: str = "") -> Axes:
    """A tree given by ``parent[r]`` (``-1`` at the root): ranks placed by depth
    (down) and by number (across), an edge to each parent, inner nodes red and
    leaves green."""
    import matplotlib.pyplot as plt

    parent = np.asarray(parent)
    p = len(parent)
    ax = ax or plt.subplots(figsize=(5, 2.6))[1]
    depth = np.zeros(p, int)
    for r in range(p):
        x = r
        while parent[x] >= 0:
            depth[r], x = depth[r] + 1, parent[x]
    for r, up in enumerate(parent):
        if up >= 0:
            ax.plot([r, up], [-depth[r], -depth[up]], color="0.6", zorder=1)
    inner = np.isin(np.arange(p), parent)
    ax.scatter(np.arange(p), -depth, s=280, c=np.where(inner, "tab:red", "tab:green"), zorder=2)
    for r in range(p):
        ax.annotate(str(r), (r, -depth[r]), ha="center", va="center", color="white", fontsize=9)
    ax.set_title(title, fontsize=10)
    ax.set_axis_off()
    return ax
