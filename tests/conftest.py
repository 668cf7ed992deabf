"""Shared test helpers: the menu of (collective, algorithm) pairs and spec options."""

from __future__ import annotations

import numpy as np

import mycollectives as mc
from mycollectives.algorithms import COLLECTIVES

MENU = [(c, a) for c in COLLECTIVES for a in mc.algorithms(c)]
ROOTED = {"broadcast", "reduce", "scatter", "gather"}


def local_size_for(p: int) -> int:
    """A node size that divides p and gives more than one node where possible."""
    return next(ls for ls in (2, 3, 1) if p % ls == 0)


def random_splits(rng: np.random.Generator, p: int, high: int = 4) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(int(x) for x in row) for row in rng.integers(0, high, (p, p)))
