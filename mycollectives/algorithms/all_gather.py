"""All-gather: every rank ends with every rank's block.

Buffer layout: ``WORK`` holds ``p`` blocks of ``count`` elements, block ``j``
belonging to rank ``j``; rank ``r`` starts with only block ``r`` filled.
"""

from __future__ import annotations

import numpy as np

from ..schedule import Chunks, Round, ceil_log2, floor_pow2, split
from ._fold import extras
from .registry import Spec, register


def ring_all_gather(k: int, chunks: Chunks) -> list[Round]:
    """Ring over virtual ranks ``0..k-1``; rank ``v`` starts with chunk ``v``.

    In step ``s`` every rank passes on the chunk it received in step ``s-1``
    (its own in step 0): ``k-1`` steps, each rank sends ``k-1`` chunks.
    """
    v = np.arange(k)
    rounds = []
    for step in range(k - 1):
        off, cnt = chunks[(v - step) % k]
        rounds.append(Round.of(v, (v + 1) % k, off, cnt))
    return rounds


def direct_all_gather(k: int, chunks: Chunks) -> list[Round]:
    """One round: rank ``v`` sends chunk ``v`` straight to every other rank.

    The ring's bytes in one round instead of ``k-1``, at the price of
    ``k-1`` messages in flight per rank at once.
    """
    src, dst = np.divmod(np.arange(k * k), k)
    src, dst = src[src != dst], dst[src != dst]
    off, cnt = chunks[src]
    return [Round.of(src, dst, off, cnt)]


def ring_spans(chunks: Chunks, start, length) -> list[tuple]:
    """Chunks ``start, start+1, ...`` (``length`` of them, wrapping past the end)
    as at most two contiguous ``(offset, count)`` pieces."""
    k = len(chunks)
    start, length = np.asarray(start), np.asarray(length)
    first = np.minimum(length, k - start)
    return [chunks.span(start, start + first), chunks.span(0 * start, length - first)]


def rd_all_gather_core(p: int, chunks: Chunks) -> list[Round]:
    """Recursive doubling among the ``p2`` lowest ranks.

    Rank ``v`` owns chunk ``v`` and, if it has an extra rank ``p2 + v``, that
    rank's chunk too. In the step of distance ``d`` it swaps with ``v ^ d``
    everything its group of ``d`` ranks owns: two contiguous pieces.
    """
    p2 = floor_pow2(p)
    v = np.arange(p2)
    rounds = []
    d = 1
    while d < p2:
        g = v & ~(d - 1)  # first rank of v's group
        own = chunks.span(g, g + d)
        ext = chunks.span(np.minimum(g + p2, p), np.minimum(g + d + p2, p))
        rounds.append(Round.cat([Round.of(v, v ^ d, *own), Round.of(v, v ^ d, *ext)]))
        d *= 2
    return rounds


@register("all_gather", "ring")
def ring(spec: Spec) -> list[Round]:
    return ring_all_gather(spec.world_size, split(spec.world_size * spec.count, spec.world_size))


@register("all_gather", "direct")
def direct(spec: Spec) -> list[Round]:
    return direct_all_gather(spec.world_size, split(spec.world_size * spec.count, spec.world_size))


@register("all_gather", "recursive_doubling")
def recursive_doubling(spec: Spec) -> list[Round]:
    p, n = spec.world_size, spec.count
    chunks = split(p * n, p)
    extra, partner = extras(p)
    everything_but_own = [  # what the extra rank e gets back at the end
        Round.of(partner, extra, 0, extra * n),
        Round.of(partner, extra, (extra + 1) * n, (p - extra - 1) * n),
    ]
    return [
        Round.of(extra, partner, extra * n, n),  # fold in: hand over own block
        *rd_all_gather_core(p, chunks),
        Round.cat(everything_but_own),
    ]


@register("all_gather", "bruck")
def bruck(spec: Spec) -> list[Round]:
    """Bruck et al. (1997): ``ceil(log2 p)`` steps for any ``p``.

    Before the step of distance ``d`` rank ``r`` holds blocks ``r .. r+d-1``
    (mod ``p``); it receives the next ``min(d, p-d)`` from rank ``r+d``. Blocks
    stay in their own slots, so no final rotation is needed; a run that wraps
    past the end of the buffer goes as two pieces of one message.
    """
    p = spec.world_size
    chunks = split(p * spec.count, p)
    r = np.arange(p)
    rounds = []
    for k in range(ceil_log2(p)):
        d = 1 << k
        src, dst = (r + d) % p, r
        pieces = ring_spans(chunks, src, np.full(p, min(d, p - d)))
        rounds.append(Round.cat(Round.of(src, dst, off, cnt) for off, cnt in pieces))
    return rounds
