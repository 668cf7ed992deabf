"""All-reduce: every rank ends with the elementwise reduction of all vectors.

Buffer layout: ``WORK`` holds the ``count`` elements (the caller's tensor,
reduced in place). The pipelined double binary tree is in ``trees.py`` and
the two-level hierarchical algorithm in ``hierarchical.py``.
"""

from __future__ import annotations

import numpy as np

from ..schedule import Round, floor_pow2, split
from ._fold import fold_in, fold_out
from .all_gather import direct_all_gather, rd_all_gather_core, ring_all_gather
from .broadcast import binomial_broadcast
from .reduce import binomial_reduce
from .reduce_scatter import direct_reduce_scatter, rh_reduce_scatter_core, ring_reduce_scatter
from .registry import Spec, register


@register("all_reduce", "reduce_broadcast")
def reduce_broadcast(spec: Spec) -> list[Round]:
    """Binomial reduce to rank 0, then binomial broadcast from it: ``2 log p`` rounds."""
    p, n = spec.world_size, spec.count
    return binomial_reduce(p, 0, n) + binomial_broadcast(p, 0, n)


@register("all_reduce", "ring")
def ring(spec: Spec) -> list[Round]:
    """Ring reduce-scatter, then ring all-gather, on ``p`` chunks of the vector.

    ``2(p-1)`` rounds; each rank sends ``2(p-1)/p`` of the vector, the
    bandwidth lower bound (Patarasuk and Yuan 2009).
    """
    p = spec.world_size
    chunks = split(spec.count, p)
    return ring_reduce_scatter(p, chunks) + ring_all_gather(p, chunks)


@register("all_reduce", "direct")
def direct(spec: Spec) -> list[Round]:
    """The ring's reduce-scatter and all-gather, each done in one round of
    direct messages: every rank sends chunk ``w`` to rank ``w`` and adds what
    it receives into its own chunk, then sends its finished chunk to all.

    The ring's bytes per rank in 2 rounds instead of ``2(p-1)``, with ``p-1``
    messages in flight per rank. GPU libraries call this pattern a two-shot
    all-reduce. It pays where each round has a fixed cost the model's
    ``alpha`` does not capture (a software stack's wake-ups and hand-offs), and
    loses where ``p-1`` senders at once overwhelm a link (incast).
    """
    p = spec.world_size
    chunks = split(spec.count, p)
    return direct_reduce_scatter(p, chunks) + direct_all_gather(p, chunks)


@register("all_reduce", "one_shot", heap_only=True)
def one_shot(spec: Spec) -> list[Round]:
    """One round: every rank reads every peer's whole vector and adds it to
    its own. ``p-1`` vectors per rank, but a single round: the latency-bound
    choice on symmetric memory, where a read costs little beyond its bytes
    (PyTorch's ``one_shot_all_reduce``; NCCL's symmetric kernels).
    Its two-round counterpart, reduce-scatter then all-gather with every
    rank reading its share from all, is ``direct`` (a "two-shot" all-reduce).
    """
    p = spec.world_size
    src, dst = np.divmod(np.arange(p * p), p)
    keep = src != dst
    return [Round.of(src[keep], dst[keep], 0, spec.count, reduce=True)]


@register("all_reduce", "recursive_doubling")
def recursive_doubling(spec: Spec) -> list[Round]:
    """Swap whole vectors with the rank at distance 1, 2, 4, ...: ``log p`` rounds.

    Extra ranks beyond a power of two fold in first and get the result last.
    """
    p, n = spec.world_size, spec.count
    p2 = floor_pow2(p)
    v = np.arange(p2)
    rounds = [fold_in(p, 0, n, reduce=True)]
    d = 1
    while d < p2:
        rounds.append(Round.of(v, v ^ d, 0, n, reduce=True))
        d *= 2
    rounds.append(fold_out(p, 0, n))
    return rounds


@register("all_reduce", "rabenseifner")
def rabenseifner(spec: Spec) -> list[Round]:
    """Recursive-halving reduce-scatter, then recursive-doubling all-gather.

    ``2 log p`` rounds and the ring's ``2(p-1)/p`` of the vector per rank
    (Rabenseifner 2004; Thakur, Rabenseifner and Gropp 2005).
    """
    p, n = spec.world_size, spec.count
    chunks = split(n, p)
    return [
        fold_in(p, 0, n, reduce=True),
        *rh_reduce_scatter_core(p, chunks),
        *rd_all_gather_core(p, chunks),
        fold_out(p, 0, n),
    ]
