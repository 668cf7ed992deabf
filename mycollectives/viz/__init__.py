"""Pictures of schedules and simulations, all drawn from the same schedules or traces.

Chapter 3 uses the space-time diagrams, buffer pictures and animations;
chapters 2, 3 and 3b the cost model's figures (:mod:`.costs`); chapter 4
the topology drawings, link heatmaps and busbw plots. Everything
needs matplotlib (the ``book`` and ``test`` extras); ``step_through`` needs
ipywidgets too.
"""

from __future__ import annotations

from .animation import animate, play, step_through, to_html
from .buffers import buffer_states, chunk_bounds, chunk_label, draw_buffers, mask_colours, rank_colours
from .costs import choice_map, message_times, pingpong_fit, size_label, time_per_byte
from .diagrams import draw_tree, message_lanes, spacetime, spacetime_trace
from .plots import (
    best_changes,
    busbw_plot,
    expected_busbw_plot,
    hierarchy_plot,
    link_heatmap,
    validation_plot,
)
from .rails import channel_links, draw_rails
from .topo import draw_round, draw_topology, ring_positions

__all__ = [
    "spacetime",
    "channel_links",
    "draw_rails",
    "spacetime_trace",
    "message_lanes",
    "draw_tree",
    "chunk_bounds",
    "chunk_label",
    "choice_map",
    "message_times",
    "pingpong_fit",
    "size_label",
    "time_per_byte",
    "buffer_states",
    "draw_buffers",
    "mask_colours",
    "rank_colours",
    "draw_topology",
    "draw_round",
    "ring_positions",
    "animate",
    "play",
    "to_html",
    "step_through",
    "link_heatmap",
    "busbw_plot",
    "expected_busbw_plot",
    "best_changes",
    "hierarchy_plot",
    "validation_plot",
]
