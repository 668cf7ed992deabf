"""Schedules in motion: an animation for the static book, a slider for live notebooks.

:func:`animate` returns a matplotlib ``FuncAnimation`` with one frame per
round: the round's arrows on the left, every rank's buffer on the right.
``to_html(anim)`` turns it into self-contained HTML and JavaScript
(matplotlib's ``to_jshtml``) that plays in the rendered book with no kernel.
:func:`play` is the two together, ready for a notebook to display.
:func:`step_through` is the live-notebook version: an ipywidgets slider that
redraws the same two panels.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ..schedule import Schedule
from ..topology import Topology
from .buffers import buffer_states, draw_buffers
from .topo import draw_round

if TYPE_CHECKING:
    from ipywidgets import VBox
    from matplotlib.animation import FuncAnimation


# Sized for a book's text column (about 700 px at 100 dpi): shown unscaled,
# its 8 to 10 point text stays over 10 px high.
FIGSIZE = (7.0, 3.3)


def _frame(fig, schedule: Schedule, k: int, states, topo: Topology | None):
    fig.clear()
    left, right = fig.subplots(1, 2, gridspec_kw=dict(width_ratios=[1, 1.25]))
    if k < len(schedule.rounds):
        draw_round(schedule, k, topo, left)
    else:
        left.set_axis_off()
        left.set_title("done")
    draw_buffers(schedule, k + 1, right, states)
    fig.suptitle(
        f"{schedule.collective}/{schedule.algorithm}, {schedule.world_size} ranks"
        "    arrows: red adds, blue copies; cN: chunk N",
        fontsize=9,
    )
    fig.subplots_adjust(left=0.02, right=0.98, top=0.82, bottom=0.14, wspace=0.3)
    return left, right


def animate(schedule: Schedule, topology: Topology | None = None, interval: int = 900) -> FuncAnimation:
    """One frame per round (arrows, then the buffers after it). Returns a ``FuncAnimation``."""
    import matplotlib.pyplot as plt
    from matplotlib.animation import FuncAnimation

    states = buffer_states(schedule)
    fig = plt.figure(figsize=FIGSIZE, dpi=100)
    anim = FuncAnimation(
        fig,
        lambda k: _frame(fig, schedule, k, states, topology),
        frames=len(schedule.rounds),
        interval=interval,
        repeat=True,
    )
    plt.close(fig)  # shown through to_html, not as a static figure
    return anim


# matplotlib's player draws its buttons with Font Awesome icons, which only a page
# that loads Font Awesome shows; plain Unicode glyphs show everywhere.
_GLYPHS = {
    "fa fa-minus": "\u2212",
    "fa fa-fast-backward": "|\u25c0\u25c0",
    "fa fa-step-backward": "|\u25c0",
    "fa fa-play fa-flip-horizontal": "\u25c0",
    "fa fa-pause": "||",
    "fa fa-play": "\u25b6",
    "fa fa-step-forward": "\u25b6|",
    "fa fa-fast-forward": "\u25b6\u25b6|",
    "fa fa-plus": "+",
}


_REMOTE_CSS = re.compile(r'<link rel="stylesheet"\s+href="https?://[^"]*"\s*/?>')


def to_html(anim, glyphs: bool = True) -> str:
    """Self-contained HTML/JS player for an animation (no kernel needed).

    ``glyphs=True`` swaps the player's Font Awesome icons for Unicode ones,
    so its buttons are labelled on any page, the rendered book included, and
    drops the player's Font Awesome stylesheet, which matplotlib loads from a
    CDN: the book must work offline.
    """
    html = anim.to_jshtml(default_mode="once")
    if glyphs:
        for icon, text in _GLYPHS.items():
            html = html.replace(f'<i class="{icon}"></i>', text)
        html = _REMOTE_CSS.sub("", html)
    return html


def play(schedule: Schedule, topology: Topology | None = None, interval: int = 900):
    """``schedule``'s animation as an object a notebook displays: the player of
    :func:`to_html` around :func:`animate` (chapters 3 and 3b)."""
    from IPython.display import HTML

    return HTML(to_html(animate(schedule, topology, interval)))


def step_through(schedule: Schedule, topology: Topology | None = None) -> VBox:
    """An ipywidgets slider over the rounds of ``schedule`` (live notebooks only)."""
    import ipywidgets as widgets
    import matplotlib.pyplot as plt

    states = buffer_states(schedule)
    out = widgets.Output()
    slider = widgets.IntSlider(value=0, min=0, max=max(len(schedule.rounds) - 1, 0), description="round")

    def show(change=None):
        with out:
            out.clear_output(wait=True)
            fig = plt.figure(figsize=FIGSIZE, dpi=100)
            _frame(fig, schedule, slider.value, states, topology)
            plt.show()

    slider.observe(show, names="value")
    show()
    return widgets.VBox([slider, out])
