"""Reduce: the root ends with the elementwise reduction of every rank's vector.

Buffer layout: ``WORK`` holds the ``count`` elements on every rank (the API
gives non-root ranks a scratch copy, so their input stays untouched); on
return the root's holds the result.
"""

from __future__ import annotations

import numpy as np

from ..schedule import Round, mirror, relabel, split
from ._fold import extras, fold_in
from .broadcast import binomial_broadcast
from .reduce_scatter import rh_reduce_scatter_core
from .registry import Spec, register
from .scatter_gather import binomial_scatter


@register("reduce", "linear")
def linear(spec: Spec) -> list[Round]:
    """Every rank sends its vector to the root, which adds them up as they come."""
    others = np.arange(1, spec.world_size)
    return relabel([Round.of(others, 0, 0, spec.count, reduce=True)], spec.from_root)


def binomial_reduce(k: int, off: int, count: int) -> list[Round]:
    """The binomial broadcast tree run backwards: partial sums flow to the root."""
    return mirror(binomial_broadcast(k, off, count), reduce=True)


@register("reduce", "binomial")
def binomial(spec: Spec) -> list[Round]:
    return relabel(binomial_reduce(spec.world_size, 0, spec.count), spec.from_root)


@register("reduce", "rabenseifner")
def rabenseifner(spec: Spec) -> list[Round]:
    """Reduce-scatter by recursive halving, then a binomial gather to the root.

    Each rank sends about ``2n`` elements instead of ``n log p``: the
    bandwidth-optimal choice for long vectors (Rabenseifner 2004).
    """
    p = spec.world_size
    chunks = split(spec.count, p)  # chunk v is reduced at virtual rank v
    extra, partner = extras(p)
    rounds = [
        fold_in(p, 0, spec.count, reduce=True),
        *rh_reduce_scatter_core(p, chunks),
        Round.of(partner, extra, *chunks[extra]),  # extra ranks take their finished chunk
        *mirror(binomial_scatter(p, chunks), reduce=False),
    ]
    return relabel(rounds, spec.from_root)
