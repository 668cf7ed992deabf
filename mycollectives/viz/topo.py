"""Topologies and the traffic of one round drawn on them (chapter 4).

:func:`draw_topology` places each vertex where its preset put it and draws
each cable once, coloured by how busy it was if given a per-link value (the
simulator's utilisation). :func:`draw_round` overlays the transfers of one
round as arrows from GPU to GPU: the picture of a ring step on a DGX, or of
the one link every ring step crosses between nodes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..schedule import Schedule
from ..topology import Topology

if TYPE_CHECKING:
    from matplotlib.axes import Axes

_KIND_STYLE = {
    "gpu": dict(marker="s", color="tab:green", s=160),
    "nvswitch": dict(marker="D", color="tab:purple", s=140),
    "bridge": dict(marker="D", color="tab:purple", s=100),
    "host": dict(marker="h", color="tab:gray", s=180),
    "nic": dict(marker="o", color="tab:orange", s=70),
    "leaf": dict(marker="^", color="tab:blue", s=120),
    "spine": dict(marker="^", color="tab:red", s=160),
}


def ring_positions(p: int) -> np.ndarray:
    """Ranks on a circle (for schedules drawn without a topology)."""
    a = np.pi / 2 - 2 * np.pi * np.arange(p) / max(p, 1)
    return np.stack([np.cos(a), np.sin(a)], 1) * max(1.0, p / 6)


def draw_topology(
    topo: Topology, ax: Axes | None = None, link_values=None, labels: bool | None = None
) -> Axes:
    """Vertices and cables; ``link_values`` (per directed link, 0..1) colours each
    cable by its busier direction. Returns the axes."""
    import matplotlib.pyplot as plt
    from matplotlib.collections import LineCollection

    ax = ax or plt.subplots(figsize=(min(14, 2 + np.ptp(topo.pos[:, 0]) * 0.6), 4))[1]
    pairs = np.arange(0, topo.num_links, 2)  # builder adds the two directions together
    a, b = topo.link_src[pairs], topo.link_dst[pairs]
    segs = np.stack([topo.pos[a], topo.pos[b]], 1)
    if link_values is None:
        lc = LineCollection(segs, colors="0.6", linewidths=1.0, zorder=1)
    else:
        v = np.maximum(np.asarray(link_values)[pairs], np.asarray(link_values)[pairs + 1])
        lc = LineCollection(segs, cmap="viridis", linewidths=2.5, zorder=1)
        lc.set_array(v)
        lc.set_clim(0, 1)
        plt.colorbar(lc, ax=ax, label="link utilisation")
    ax.add_collection(lc)
    kinds = np.array(topo.kinds)
    for kind, style in _KIND_STYLE.items():
        sel = kinds == kind
        if sel.any():
            ax.scatter(*topo.pos[sel].T, zorder=3, label=kind, **style)
    if labels or (labels is None and topo.num_gpus <= 16):
        for g in range(topo.num_gpus):
            ax.annotate(str(g), topo.pos[g], ha="center", va="center", fontsize=7, color="white", zorder=4)
    ax.set_title(topo.name)
    ax.set_axis_off()
    ax.autoscale_view()
    return ax


def _on_arc(a: np.ndarray, b: np.ndarray, rad: float, t: float) -> np.ndarray:
    """The point at ``t`` (0 at ``a``, 1 at ``b``) of matplotlib's ``arc3`` curve
    from ``a`` to ``b``, a quadratic Bezier curve (equal axes)."""
    d = b - a
    control = (a + b) / 2 + rad * np.array([d[1], -d[0]])
    return (1 - t) ** 2 * a + 2 * (1 - t) * t * control + t**2 * b


def _ranks(p: int, topo: Topology | None, ax: Axes | None) -> tuple[Axes, np.ndarray]:
    """The ranks drawn (on ``topo``, or as a ring of discs) and their positions."""
    import matplotlib.pyplot as plt

    if topo is not None:
        return draw_topology(topo, ax), topo.pos[:p] + [0, 0.25]
    ax = ax or plt.subplots(figsize=(4, 4))[1]
    pos = ring_positions(p)
    ax.scatter(*pos.T, s=260 if p <= 6 else 170, color="tab:green", zorder=3)
    for r in range(p):
        ax.annotate(str(r), pos[r], ha="center", va="center", color="white", fontsize=9, zorder=4)
    ax.set_aspect("equal")
    ax.set_axis_off()
    return ax, pos


def _arrows(schedule: Schedule, k: int, buf: int) -> dict[tuple[int, int], tuple[list, bool]]:
    """Round ``k``'s messages, one per (sender, receiver): the pieces of
    buffer ``buf`` they carry, ``(offset, count)`` each, and whether any adds."""
    r = schedule.rounds[k]
    remote = r.src != r.dst
    out: dict[tuple[int, int], tuple[list, bool]] = {}
    cols = (
        getattr(r, c)[remote].tolist()
        for c in ("src", "dst", "sbuf", "soff", "dbuf", "doff", "count", "reduce")
    )
    for s, d, sb, so, db, do, n, red in zip(*cols):
        got, adds = out.get((s, d), ([], False))
        if db == buf:
            got.append((do, n))
        elif sb == buf:
            got.append((so, n))
        out[s, d] = (got, adds or bool(red))
    return out


def draw_round(
    schedule: Schedule, k: int, topo: Topology | None = None, ax: Axes | None = None, labels: bool = True
) -> Axes:
    """The transfers of round ``k`` as arrows between ranks, on ``topo`` if given.

    Red arrows add into what the receiver holds, blue ones copy. With
    ``labels``, each arrow names the chunks of the result buffer it carries
    (``c2``: the columns of :func:`~mycollectives.viz.buffers.draw_buffers`),
    unless the schedule moves the buffer whole.
    """
    from .buffers import chunk_bounds, chunk_label, result_buffer

    ax, pos = _ranks(schedule.world_size, topo, ax)
    bounds = chunk_bounds(schedule) if labels else np.zeros(0)
    rad = 0.25
    for (s, d), (where, adds) in _arrows(schedule, k, result_buffer(schedule)).items():
        colour = "tab:red" if adds else "tab:blue"
        ax.annotate(
            "",
            pos[d],
            pos[s],
            arrowprops=dict(
                arrowstyle="-|>",
                color=colour,
                lw=1.6,
                mutation_scale=16,
                shrinkA=10,
                shrinkB=11,  # stop at the receiver's disc, so the head shows
                connectionstyle=f"arc3,rad={rad}",
            ),
            zorder=5,
        )
        text = chunk_label(bounds, where) if labels else ""
        if text:
            ax.annotate(
                text,
                _on_arc(pos[s], pos[d], rad, 0.3),  # nearer the sender: labels of crossing arrows part
                ha="center",
                va="center",
                fontsize=8,
                color=colour,
                zorder=6,
                bbox=dict(boxstyle="round,pad=0.15", fc="white", ec="none", alpha=0.85),
            )
    ax.set_title(f"round {k + 1} of {len(schedule.rounds)}", fontsize=10)
    ax.autoscale_view()
    return ax
