"""Broadcast: every rank ends with the root's vector.

Buffer layout: ``WORK`` holds the ``count`` elements; only the root's is
filled at the start.
"""

from __future__ import annotations

import numpy as np

from ..schedule import Chunks, Round, ceil_log2, num_segments, relabel, split
from .all_gather import ring_all_gather
from .registry import Spec, register
from .scatter_gather import binomial_scatter


def binomial_broadcast(k: int, off: int, count: int) -> list[Round]:
    """Binomial tree over virtual ranks ``0..k-1`` rooted at 0.

    The same tree as :func:`binomial_scatter`, but every edge carries the
    whole vector: in the step of distance ``d`` (largest first) each holder
    ``v`` (a multiple of ``2d``) sends to ``v+d``. ``ceil(log2 k)`` steps.
    """
    rounds = []
    for step in reversed(range(ceil_log2(k))):
        d = 1 << step
        v = np.arange(0, k, 2 * d)
        v = v[v + d < k]
        rounds.append(Round.of(v, v + d, off, count))
    return rounds


def chain_broadcast(k: int, segments: Chunks) -> list[Round]:
    """A pipelined chain ``0 -> 1 -> ... -> k-1`` carrying the vector in segments.

    In round ``t`` rank ``v`` forwards segment ``t - v``: once the pipeline is
    full every link is busy, and ``k - 2 + S`` rounds move ``S`` segments.
    """
    rounds = []
    for t in range(k - 2 + len(segments)):
        v = np.arange(k - 1)
        s = t - v
        ok = (s >= 0) & (s < len(segments))
        rounds.append(Round.of(v[ok], v[ok] + 1, *segments[s[ok]]))
    return rounds


@register("broadcast", "linear")
def linear(spec: Spec) -> list[Round]:
    others = np.arange(1, spec.world_size)
    return relabel([Round.of(0, others, 0, spec.count)], spec.from_root)


@register("broadcast", "binomial")
def binomial(spec: Spec) -> list[Round]:
    return relabel(binomial_broadcast(spec.world_size, 0, spec.count), spec.from_root)


@register("broadcast", "chain", uses=("segment",))
def chain(spec: Spec) -> list[Round]:
    segments = split(spec.count, num_segments(spec.count, spec.segment))
    return relabel(chain_broadcast(spec.world_size, segments), spec.from_root)


@register("broadcast", "scatter_allgather")
def scatter_allgather(spec: Spec) -> list[Round]:
    """van de Geijn: scatter the vector in ``p`` chunks, then ring all-gather them.

    Each rank sends and receives about ``2n`` elements in total instead of
    the tree's ``n log p``, at the price of ``log p + p - 1`` rounds.
    """
    p = spec.world_size
    chunks = split(spec.count, p)
    rounds = binomial_scatter(p, chunks) + ring_all_gather(p, chunks)
    return relabel(rounds, spec.from_root)
