"""Channels on rails (chapter 4): the rings of a schedule cut into channels, each on its own NIC.

:func:`draw_rails` draws a multi-node cluster and, over it, the ring of every
channel of a ring all-reduce cut into ``k`` channels
(:mod:`mycollectives.algorithms.channels`): one colour per channel, along the
links its transfers take (``Topology.route`` with the channel's rail), so
channel ``c`` is seen to leave and enter every node through NIC ``c`` and
its rail's leaf switch. Both the rings and the routes are the ones a virtual
run uses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..algorithms import schedule_for
from ..topology import Topology
from .topo import draw_topology

if TYPE_CHECKING:
    from matplotlib.axes import Axes


def channel_links(topo: Topology, k: int) -> list[np.ndarray]:
    """Per channel, the directed links its ring's transfers cross (a ring all-reduce's first round)."""
    p, local = topo.num_gpus, topo.gpus_per_node
    first = schedule_for("all_reduce", "ring", p, count=p * k, channels=k, local_size=local).rounds[0]
    out = []
    for c in range(k):
        on = first.channel == c
        _, links = topo.route(first.src[on], first.dst[on], np.full(int(on.sum()), c))
        out.append(np.unique(links))
    return out


def draw_rails(topo: Topology, k: int | None = None, ax: Axes | None = None) -> Axes:
    """``topo`` with the ring of each of ``k`` channels (default: one per NIC) drawn in its own colour."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    k = k or max(topo.nics_per_node, 1)
    ax = draw_topology(topo, ax, labels=False)
    colours = plt.get_cmap("tab10" if k <= 10 else "tab20")
    shift = 0.12 * (np.arange(k) - (k - 1) / 2) / max(k, 1)
    for c, links in enumerate(channel_links(topo, k)):
        a, b = topo.pos[topo.link_src[links]], topo.pos[topo.link_dst[links]]
        for (x0, y0), (x1, y1) in zip(a + shift[c], b + shift[c]):
            ax.annotate("", (x1, y1), (x0, y0), zorder=3,
                        arrowprops=dict(arrowstyle="-|>", color=colours(c % colours.N), lw=1.2, alpha=0.8))  # fmt: skip
    handles = [Line2D([], [], color=colours(c % colours.N), label=f"channel {c}") for c in range(k)]
    ax.legend(handles=handles, fontsize=7, ncol=min(k, 8), loc="upper center", bbox_to_anchor=(0.5, -0.02))
    ax.set_title(f"{k} ring channels on {topo.name}: channel c crosses nodes on NIC c")
    return ax
