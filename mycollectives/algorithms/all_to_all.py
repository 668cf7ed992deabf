"""All-to-all: rank ``s`` sends its ``d``-th block to rank ``d``, for all ``s, d``.

Buffer layout: ``IN`` on rank ``s`` holds the blocks for ranks ``0..p-1`` in
order, ``splits[s][d]`` elements each; ``OUT`` on rank ``d`` receives the
blocks from ranks ``0..p-1`` in order. Blocks may differ in size (the uneven
splits of ``all_to_all_single``, as in expert-parallel token dispatch).
"""

from __future__ import annotations

import numpy as np

from ..schedule import IN, OUT, TMP, Round, ceil_log2
from .registry import Spec, register


def _layout(spec: Spec):
    m = np.asarray(spec.splits, dtype=np.int64).reshape(spec.world_size, spec.world_size)
    in_off = np.cumsum(m, axis=1) - m  # in_off[s, d]: where block s->d starts on s
    out_off = np.cumsum(m, axis=0) - m  # out_off[s, d]: where it lands on d
    return m, in_off, out_off


def _direct(spec: Spec, s: np.ndarray, d: np.ndarray) -> Round:
    m, in_off, out_off = _layout(spec)
    return Round.of(s, d, in_off[s, d], m[s, d], sbuf=IN, dbuf=OUT, doff=out_off[s, d])


@register("all_to_all", "linear")
def linear(spec: Spec) -> list[Round]:
    """Every rank posts all its sends and receives at once: one round, ``p-1`` messages each."""
    s, d = np.divmod(np.arange(spec.world_size**2), spec.world_size)
    return [_direct(spec, s, d)]


@register("all_to_all", "pairwise")
def pairwise(spec: Spec) -> list[Round]:
    """``p-1`` rounds; in round ``k`` rank ``r`` sends to ``r+k`` and receives from ``r-k``.

    One message in and one out per rank per round, so no rank is swamped.
    """
    p = spec.world_size
    r = np.arange(p)
    return [_direct(spec, r, (r + k) % p) for k in range(p)]  # k = 0: the rank's own block


@register("all_to_all", "bruck")
def bruck(spec: Spec) -> list[Round]:
    """Bruck et al. (1997): ``ceil(log2 p)`` rounds, each moving about half the data.

    Rank ``r`` first copies the block for rank ``r+j`` into its slot ``j``.
    In round ``k`` every slot whose index has bit ``k`` set moves ``2**k``
    ranks on, so a block travels ``j`` ranks in binary steps; at the end slot
    ``j`` of rank ``r`` holds the block from rank ``r-j``. Slots are sized
    for the largest block that ever sits in them (blocks may be uneven).
    """
    p = spec.world_size
    m, in_off, out_off = _layout(spec)
    r, j = np.meshgrid(np.arange(p), np.arange(p), indexing="ij")  # [rank, slot]
    steps = ceil_log2(p)
    held = []  # held[k][r, j]: size of the block in slot j of rank r before round k
    for k in range(steps + 1):
        src = (r - (j % (1 << k))) % p
        held.append(m[src, (src + j) % p])
    slot = np.max(held, axis=0)
    slot_off = np.cumsum(slot, axis=1) - slot  # [rank, slot] -> offset in TMP

    rounds = [Round.of(r, r, in_off[r, (r + j) % p], m[r, (r + j) % p], sbuf=IN, dbuf=TMP, doff=slot_off)]
    for k in range(steps):
        moving = (j & (1 << k)) != 0
        src, sl = r[moving], j[moving]
        dst = (src + (1 << k)) % p
        rounds.append(
            Round.of(
                src, dst, slot_off[src, sl], held[k][src, sl], sbuf=TMP, dbuf=TMP, doff=slot_off[dst, sl]
            )
        )
    origin = (r - j) % p
    rounds.append(Round.of(r, r, slot_off, m[origin, r], sbuf=TMP, dbuf=OUT, doff=out_off[origin, r]))
    return rounds
