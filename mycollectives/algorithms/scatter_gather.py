"""Scatter and gather: the root hands each rank its block, or collects them.

Buffer layout (rotated so that trees cut it into contiguous pieces): ``WORK``
holds ``p`` blocks of ``count`` elements, block ``v`` belonging to rank
``(root + v) % p``. For scatter the root starts with every block and rank
``r`` ends with its block in slot ``(r - root) % p``; gather is the reverse.
A gather is a scatter run backwards (:func:`~mycollectives.schedule.mirror`).
"""

from __future__ import annotations

import numpy as np

from ..schedule import Chunks, Round, ceil_log2, mirror, relabel, split
from .registry import Spec, register


def binomial_scatter(k: int, chunks: Chunks) -> list[Round]:
    """Binomial tree over virtual ranks ``0..k-1`` rooted at 0; chunk ``v`` ends at ``v``.

    In the step of distance ``d`` (largest first) every rank ``v`` that is a
    multiple of ``2d`` and holds chunks ``v .. v+2d-1`` hands the upper half,
    ``v+d .. v+2d-1``, to rank ``v+d``: ``ceil(log2 k)`` steps.
    """
    rounds = []
    for step in reversed(range(ceil_log2(k))):
        d = 1 << step
        v = np.arange(0, k, 2 * d)
        v = v[v + d < k]
        off, cnt = chunks.span(v + d, np.minimum(v + 2 * d, k))
        rounds.append(Round.of(v, v + d, off, cnt))
    return rounds


def linear_scatter(k: int, chunks: Chunks) -> list[Round]:
    """The root sends every other rank its chunk, all in one round."""
    v = np.arange(1, k)
    return [Round.of(0, v, *chunks[v])]


def _rooted(spec: Spec, tree) -> list[Round]:
    p = spec.world_size
    return relabel(tree(p, split(p * spec.count, p)), spec.from_root)


@register("scatter", "linear")
def scatter_linear(spec: Spec) -> list[Round]:
    return _rooted(spec, linear_scatter)


@register("scatter", "binomial")
def scatter_binomial(spec: Spec) -> list[Round]:
    return _rooted(spec, binomial_scatter)


@register("gather", "linear")
def gather_linear(spec: Spec) -> list[Round]:
    return mirror(_rooted(spec, linear_scatter), reduce=False)


@register("gather", "binomial")
def gather_binomial(spec: Spec) -> list[Round]:
    return mirror(_rooted(spec, binomial_scatter), reduce=False)
