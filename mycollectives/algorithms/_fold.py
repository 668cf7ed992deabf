"""Folding extra ranks into a power of two, for the recursive algorithms.

Recursive doubling and halving pair rank ``v`` with ``v ^ d``, which needs a
power-of-two number of ranks. With ``p = p2 + extra`` ranks (``p2`` the largest
power of two not above ``p``), the standard fix (Thakur, Rabenseifner and
Gropp 2005) lets each extra rank ``p2 + i`` hand its data to rank ``i`` first,
sit out the power-of-two part, and get the result back at the end.
"""

from __future__ import annotations

import numpy as np

from ..schedule import Round, floor_pow2


def extras(p: int) -> tuple[np.ndarray, np.ndarray]:
    """The extra ranks and the partner each one folds into."""
    p2 = floor_pow2(p)
    extra = np.arange(p2, p, dtype=np.int64)
    return extra, extra - p2


def fold_in(p: int, off, count, reduce: bool) -> Round:
    """Each extra rank sends ``count`` elements at ``off`` to its partner."""
    extra, partner = extras(p)
    return Round.of(extra, partner, off, count, reduce=reduce)


def fold_out(p: int, off, count) -> Round:
    """Each partner sends the result back to its extra rank (a copy)."""
    extra, partner = extras(p)
    return Round.of(partner, extra, off, count)
