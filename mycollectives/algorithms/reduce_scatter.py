"""Reduce-scatter: rank ``r`` ends with block ``r`` reduced over all ranks.

Buffer layout: ``WORK`` holds ``p`` blocks of ``count`` elements (a copy of
the input); on return block ``r`` of rank ``r`` holds the result.
"""

from __future__ import annotations

import numpy as np

from ..schedule import Chunks, Round, mirror, split
from ._fold import extras, fold_in
from .all_gather import direct_all_gather, rd_all_gather_core
from .registry import Spec, register


def ring_reduce_scatter(k: int, chunks: Chunks) -> list[Round]:
    """Ring over virtual ranks ``0..k-1``; rank ``v`` ends with chunk ``v`` reduced.

    In step ``s`` rank ``v`` adds its copy of chunk ``v-s-1`` to the partial
    sum arriving from ``v-1`` and passes it on: after ``k-1`` steps the sum
    of chunk ``v`` has visited every rank and stops at ``v``.
    """
    v = np.arange(k)
    rounds = []
    for step in range(k - 1):
        off, cnt = chunks[(v - step - 1) % k]
        rounds.append(Round.of(v, (v + 1) % k, off, cnt, reduce=True))
    return rounds


def direct_reduce_scatter(k: int, chunks: Chunks) -> list[Round]:
    """One round: rank ``v`` sends chunk ``w`` straight to rank ``w``, for
    every ``w != v``, and adds the ``k-1`` pieces it receives into chunk ``v``:
    the direct all-gather run backwards. The ring's bytes and additions in
    one round instead of ``k-1``.
    """
    return mirror(direct_all_gather(k, chunks), reduce=True)


def rh_reduce_scatter_core(p: int, chunks: Chunks) -> list[Round]:
    """Recursive halving among the ``p2`` lowest ranks: the recursive-doubling
    all-gather run backwards.

    Rank ``v`` is responsible for chunk ``v`` and for the chunk of its extra
    rank ``p2 + v`` if it has one. In the step of distance ``d`` (largest
    first) the group of ``2d`` ranks around ``v`` splits in halves; ``v``
    sends the other half's chunks to ``v ^ d`` and keeps (reduces into) its
    own half, exactly the transfers of the all-gather's step ``d`` reversed.
    """
    return mirror(rd_all_gather_core(p, chunks), reduce=True)


@register("reduce_scatter", "ring")
def ring(spec: Spec) -> list[Round]:
    return ring_reduce_scatter(spec.world_size, split(spec.world_size * spec.count, spec.world_size))


@register("reduce_scatter", "direct")
def direct(spec: Spec) -> list[Round]:
    return direct_reduce_scatter(spec.world_size, split(spec.world_size * spec.count, spec.world_size))


@register("reduce_scatter", "recursive_halving")
def recursive_halving(spec: Spec) -> list[Round]:
    p, n = spec.world_size, spec.count
    extra, partner = extras(p)
    return [
        fold_in(p, 0, p * n, reduce=True),
        *rh_reduce_scatter_core(p, split(p * n, p)),
        Round.of(partner, extra, extra * n, n),  # the extra rank's block, finished
    ]


@register("reduce_scatter", "pairwise")
def pairwise(spec: Spec) -> list[Round]:
    """``p-1`` steps; in step ``s`` rank ``r`` sends block ``r+s`` to its owner."""
    p, n = spec.world_size, spec.count
    r = np.arange(p)
    rounds = []
    for s in range(1, p):
        dst = (r + s) % p
        rounds.append(Round.of(r, dst, dst * n, n, reduce=True))
    return rounds
