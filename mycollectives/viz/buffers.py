"""Buffers per rank, coloured by whose data they hold (chapter 3 figures).

:func:`buffer_states` replays a schedule on labels instead of numbers with
``verify.replay``: every element carries the set of ranks whose contribution
it holds (a bit mask). :func:`draw_buffers` paints one row per rank, one cell
per element: white is empty, a rank's own colour is its data alone, a blend
of colours is a partial sum, and dark grey is the sum over every rank.

:func:`chunk_bounds` cuts the result buffer into the pieces the schedule
moves (its chunks, blocks or segments: ``c0``, ``c1``, ...), and
:func:`chunk_label` names the pieces a transfer carries, so that an arrow of
an animation and a column of its buffers carry the same name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..schedule import Schedule
from ..verify import replay, spec_of

if TYPE_CHECKING:
    from matplotlib.axes import Axes


def result_buffer(schedule: Schedule) -> int:
    """The buffer a collective's answer ends in (its record's ``output_at``)."""
    spec = spec_of(schedule)
    return spec.record.output_at(spec, 0)[0][0]


def buffer_states(schedule: Schedule, buffer: int | None = None) -> list[list[np.ndarray]]:
    """``states[k][r]``: masks of rank ``r``'s ``buffer`` before round ``k`` (and after the last)."""
    buf = result_buffer(schedule) if buffer is None else buffer
    return [[s[buf][1].copy() for s in state] for state in replay(schedule, check=False)]


def chunk_bounds(schedule: Schedule) -> np.ndarray:
    """Offsets that cut the result buffer into chunks: 0, the buffer's end, and
    every start and end of a transfer into or out of it, on any rank."""
    buf = result_buffer(schedule)
    width = int(schedule.buffers[buf].max()) if schedule.world_size else 0
    cuts = {0, width}
    for r in schedule.rounds:
        for side, off in ((r.dbuf, r.doff), (r.sbuf, r.soff)):
            mine = side == buf
            cuts.update(off[mine].tolist())
            cuts.update((off[mine] + r.count[mine]).tolist())
    return np.array(sorted(c for c in cuts if 0 <= c <= width), dtype=np.int64)


def chunk_label(bounds: np.ndarray, pieces) -> str:
    """``"c2"``, ``"c0-1"`` or ``"c0,2,5"``: the chunks that ``(offset, count)``
    pieces of the result buffer cover (``""`` when there is only one chunk)."""
    if len(bounds) <= 2:
        return ""
    covered = set()
    for off, count in pieces:
        first = int(np.searchsorted(bounds, off, side="right")) - 1
        last = int(np.searchsorted(bounds, off + count, side="left")) - 1
        covered.update(range(first, last + 1))
    runs: list[list[int]] = []
    for c in sorted(covered):
        if runs and c == runs[-1][-1] + 1:
            runs[-1].append(c)
        else:
            runs.append([c])
    if len(runs) == 1 and len(runs[0]) > 1:
        return f"c{runs[0][0]}-{runs[0][-1]}"
    return "c" + ",".join(str(c) for run in runs for c in run)


def rank_colours(p: int) -> np.ndarray:
    """One RGB colour per rank (matplotlib's tab10/tab20, then a hue wheel)."""
    import matplotlib

    if p <= 10:
        return np.array(matplotlib.colormaps["tab10"].colors[:p])
    if p <= 20:
        return np.array(matplotlib.colormaps["tab20"].colors[:p])
    return matplotlib.colormaps["hsv"](np.linspace(0, 1, p, endpoint=False))[:, :3]


def mask_colours(masks: np.ndarray, p: int) -> np.ndarray:
    """RGB for each mask: white empty, rank colour, blend of contributors, grey when complete."""
    colours = rank_colours(p)
    bits = ((masks[..., None] >> np.arange(p, dtype=np.uint64)) & np.uint64(1)).astype(float)
    n = bits.sum(-1, keepdims=True)
    rgb = np.where(n > 0, bits @ colours / np.maximum(n, 1), 1.0)
    full = n[..., 0] == p
    rgb[full] = 0.25 if p > 1 else rgb[full]
    return rgb


def draw_buffers(schedule: Schedule, step: int = -1, ax: Axes | None = None, states=None) -> Axes:
    """Each rank's buffer before round ``step`` (``-1``: at the end), one row per rank."""
    import matplotlib.pyplot as plt

    states = states or buffer_states(schedule)
    p = schedule.world_size
    masks = states[step]
    width = max((len(m) for m in masks), default=0)
    grid = np.zeros((p, width), dtype=np.uint64)
    for r, m in enumerate(masks):
        grid[r, : len(m)] = m
    ax = ax or plt.subplots(figsize=(min(12, 2 + width * 0.3), 0.4 * p + 1))[1]
    ax.imshow(mask_colours(grid, p), aspect="auto", interpolation="nearest")
    ax.set_yticks(range(p), [f"rank {r}" for r in range(p)])
    bounds = chunk_bounds(schedule)
    if len(bounds) > 2 and len(bounds) <= 17:  # name the chunks the arrows carry
        for b in bounds[1:-1]:
            ax.axvline(b - 0.5, color="black", lw=1.2)
        ax.set_xticks((bounds[:-1] + bounds[1:]) / 2 - 0.5, [f"c{i}" for i in range(len(bounds) - 1)])
        ax.set_xlabel("chunk")
    else:
        ax.set_xlabel("element")
    k = len(states) - 1 if step == -1 else step
    ax.set_title(f"{schedule.algorithm}: buffers after {k} of {len(states) - 1} rounds", fontsize=10)
    return ax
