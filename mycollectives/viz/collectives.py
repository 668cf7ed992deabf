"""What each collective does, drawn per rank: before and after (chapter 2).

The pictures follow the definitions, not an algorithm: every rank's data is
cut into ``p`` blocks, and each block is labelled with *whose* data it holds
(a bit mask of contributing ranks, as in ``verify`` and
:func:`~mycollectives.viz.buffers.draw_buffers`) and *which* block of the
contributor's buffer it is. Colours are those of ``draw_buffers``: a rank's
own colour for its data alone, dark grey for the sum over every rank, white
for nothing (or, after ``reduce`` and ``gather``, "undefined": only the root
receives a result).

Column ``j`` is block ``j`` of the whole vector, so an output of one block
(reduce-scatter, scatter) sits in the column of the block it is.

>>> before, after = collective_blocks("all_to_all", 3)
>>> after[1]  # rank 1 ends with block 1 of every rank
[(1, 1), (2, 1), (4, 1)]
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..collectives import COLLECTIVE, collectives, labelled_inputs, labelled_outputs
from .buffers import mask_colours

if TYPE_CHECKING:
    from matplotlib.axes import Axes


def shown() -> tuple[str, ...]:
    """The collectives that move data (barrier does not), as the records say now."""
    return tuple(c for c in collectives() if COLLECTIVE[c].carries_data)


def __getattr__(name: str):
    """``SHOWN``: :func:`shown`, read now (a copy taken at import would miss a record added later)."""
    if name == "SHOWN":
        return shown()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


Block = tuple[int, int] | None  # (mask of contributing ranks, block index) or empty


def _blocks(labels, p: int, rank: int) -> list[Block]:
    """``p`` columns from a rank's labelled data: ``p`` blocks fill them all; a
    single block sits in the rank's own column; no data leaves them empty."""
    row: list[Block] = [None] * p
    if labels is None:
        return row
    ids, masks = labels
    if len(ids) == p:
        return [(int(m), int(i)) for i, m in zip(ids, masks)]
    row[rank] = (int(masks[0]), int(ids[0]))
    return row


def collective_blocks(collective: str, p: int, root: int = 0) -> tuple[list[list[Block]], list[list[Block]]]:
    """``before[r][j]`` and ``after[r][j]``: what block ``j`` of rank ``r`` holds.

    A block is ``(mask, k)``: block ``k`` of the data of the ranks in ``mask``
    (summed if several), or ``None`` when the rank holds nothing there. Both
    come from the collective's record: its inputs, labelled as the verifier
    labels them, and its oracle run on those labels, with one element per block.
    """
    if collective not in shown():
        raise ValueError(f"collective must be one of {shown()}, got {collective!r}")
    if not 0 <= root < p:
        raise ValueError(f"root {root} is not a rank of a world of {p}")
    c = COLLECTIVE[collective]
    per_rank = 1 if c.blocked or c.split else p  # one element per block (per pair where split)
    spec = c.with_count(p, per_rank, **({"root": root} if c.rooted else {}))
    ins = labelled_inputs(spec)
    outs = labelled_outputs(spec, ins)
    return [_blocks(x, p, r) for r, x in enumerate(ins)], [_blocks(x, p, r) for r, x in enumerate(outs)]


def _label(block: Block, p: int) -> str:
    if block is None:
        return ""
    mask, k = block
    if mask == (1 << p) - 1 and p > 1:
        return f"Σ.{k}"
    ranks = [r for r in range(p) if mask >> r & 1]
    return "+".join(map(str, ranks)) + f".{k}"


def draw_blocks(blocks: list[list[Block]], p: int, ax: Axes, title: str = "") -> Axes:
    """One row per rank, one cell per block, coloured and labelled ``rank.block``."""
    masks = np.array([[b[0] if b else 0 for b in row] for row in blocks], dtype=np.uint64)
    ax.imshow(mask_colours(masks, p), aspect="auto", interpolation="nearest")
    for r, row in enumerate(blocks):
        for j, b in enumerate(row):
            text = _label(b, p)
            if text:
                ax.text(
                    j,
                    r,
                    text,
                    ha="center",
                    va="center",
                    fontsize=8,
                    color="w" if b[0] == (1 << p) - 1 else "k",
                )
    ax.set_yticks(range(p), [f"rank {r}" for r in range(p)], fontsize=9)
    ax.set_xticks(range(p), [f"block {j}" for j in range(p)], fontsize=8)
    ax.set_xticks(np.arange(p + 1) - 0.5, minor=True)
    ax.set_yticks(np.arange(p + 1) - 0.5, minor=True)
    ax.grid(which="minor", color="0.6", lw=0.5)
    ax.tick_params(which="minor", length=0)
    ax.set_title(title, fontsize=10)
    return ax


def draw_collective(collective: str, p: int = 4, root: int = 0, axes=None):
    """Before and after of ``collective`` on ``p`` ranks, side by side. Returns the two axes.

    Introduced in the book's chapter 2, where every collective is drawn this way.
    """
    import matplotlib.pyplot as plt

    before, after = collective_blocks(collective, p, root)
    if axes is None:
        _, axes = plt.subplots(1, 2, figsize=(6.8, 0.35 * p + 1.2))  # the book's column, unscaled
    where = f" (root {root})" if COLLECTIVE[collective].rooted else ""
    draw_blocks(before, p, axes[0], f"{collective}{where}: before")
    draw_blocks(after, p, axes[1], f"{collective}{where}: after")
    axes[1].set_yticks(range(p), [""] * p)
    return axes
