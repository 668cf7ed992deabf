"""Closed-form alpha-beta-gamma times of every algorithm in the menu (chapters 3 and 3b).

Each formula is the textbook one (Thakur, Rabenseifner and Gropp 2005,
``thakur2005``; Patarasuk and Yuan 2009, ``patarasuk2009``; Bruck et al.
1997, ``bruck1997``), written out for any ``p``, including the fold-in of the
``e = p - p2`` ranks beyond a power of two ``p2``. With ``n`` elements of
``s`` bytes, ``c = n / p`` (or the block size, for the block collectives):

========================  ===============================================
ring all-reduce           ``2(p-1) alpha + (p-1) c s (2 beta + gamma)``
recursive doubling        ``log2(p) (alpha + n s (beta + gamma))``
Rabenseifner              ``2 log2(p) alpha + (p-1) c s (2 beta + gamma)``
binomial broadcast        ``ceil(log2 p) (alpha + n s beta)``
========================  ===============================================

(the last three for ``p`` a power of two). They agree exactly with
:func:`~mycollectives.cost.counted.counted_cost` whenever ``p`` divides the
vector (``tests/test_cost.py`` checks ``p = 2..64``); otherwise the largest
chunk is ``ceil(n / p)`` and the formula is an upper bound. The pipelined
double binary tree's formula is an upper bound too: its fill and drain
rounds are lighter than the steady state it charges for every round.
"""

from __future__ import annotations

import functools

import numpy as np

from ..collectives import record
from ..schedule import ceil_log2, floor_pow2, num_segments
from .counted import Machine
from .forms import (  # noqa: F401 (FORMULAS, UPPER_BOUND, has_closed_form re-exported)
    FORMULAS,
    UPPER_BOUND,
    Formula,
    _binomial_blocks,
    _cdiv,
    _fold,
    _nodes,
    _recursive,
    formula,
    has_closed_form,
)


@formula("broadcast", "linear")
def _bcast_linear(m, p, n, s, **_):
    return (p - 1) * m.time(1, n * s)


@formula("broadcast", "binomial")
def _bcast_binomial(m, p, n, s, **_):
    return ceil_log2(p) * m.time(1, n * s)


@formula("broadcast", "chain")
def _bcast_chain(m, p, n, s, segment=None, **_):
    nseg = num_segments(n, segment)
    return (p - 2 + nseg) * m.alpha + ((p - 2) * _cdiv(n, nseg) + n) * s * m.beta


@formula("broadcast", "scatter_allgather")
def _bcast_sag(m, p, n, s, **_):
    c = _cdiv(n, p) * s
    return ceil_log2(p) * m.alpha + _binomial_blocks(p) * c * m.beta + (p - 1) * m.time(1, c)


@formula("reduce", "linear")
def _reduce_linear(m, p, n, s, **_):
    return (p - 1) * m.time(1, n * s, n * s)


@formula("reduce", "binomial")
def _reduce_binomial(m, p, n, s, **_):
    return ceil_log2(p) * m.time(1, n * s, n * s)


@formula("reduce", "rabenseifner")
def _reduce_rabenseifner(m, p, n, s, **_):
    c, e = _cdiv(n, p) * s, p - floor_pow2(p)
    folds = (e > 0) * (m.time(1, n * s, n * s) + m.time(1, c))
    gather = ceil_log2(p) * m.alpha + _binomial_blocks(p) * c * m.beta
    return folds + _recursive(m, p, c, True) + gather


# --- all-reduce --------------------------------------------------------------


@formula("all_reduce", "reduce_broadcast")
def _ar_reduce_broadcast(m, p, n, s, **_):
    return ceil_log2(p) * (m.time(1, n * s, n * s) + m.time(1, n * s))


@formula("all_reduce", "ring")
@formula("all_reduce", "direct")  # one port: p-1 messages in one round cost p-1 rounds' alpha
def _ar_ring(m, p, n, s, **_):
    c = _cdiv(n, p) * s
    return (p - 1) * (m.time(1, c, c) + m.time(1, c))


@formula("all_reduce", "one_shot")
def _ar_one_shot(m, p, n, s, **_):
    """One round in which every rank sends and reduces ``p-1`` whole vectors."""
    return (p - 1) * m.time(1, n * s, n * s)


@formula("all_reduce", "recursive_doubling")
def _ar_rd(m, p, n, s, **_):
    _, k, e, _ = _fold(p)
    return k * m.time(1, n * s, n * s) + (e > 0) * (m.time(1, n * s, n * s) + m.time(1, n * s))


@formula("all_reduce", "rabenseifner")
def _ar_rabenseifner(m, p, n, s, **_):
    c, e = _cdiv(n, p) * s, p - floor_pow2(p)
    folds = (e > 0) * (m.time(1, n * s, n * s) + m.time(1, n * s))
    return folds + _recursive(m, p, c, True) + _recursive(m, p, c, False)


@formula("all_reduce", "double_binary_tree")
def _ar_dbt(m, p, n, s, segment=None, **_):
    """Upper bound: ``S + 2H`` rounds (``S`` segments per tree, ``H`` the taller
    tree's height), each charged as the steady state of the busiest rank, which
    talks to its parent and children in both trees at once."""
    half = _cdiv(n, 2)
    nseg = num_segments(half, segment)
    seg = _cdiv(half, nseg) * s
    busiest, children, height = _double_tree(p)
    return (nseg + 2 * height) * m.time(busiest, busiest * seg, children * seg)


@functools.lru_cache(maxsize=64)
def _double_tree(p: int) -> tuple[int, int, int]:
    """NCCL's two binary trees on ``p`` ranks: the most peers and the most
    children a rank has in both together, and the taller tree's height."""
    from ..algorithms.trees import btree_parents, mirrored_parents

    trees = [btree_parents(p), mirrored_parents(p)]
    children = sum(np.bincount(t[t >= 0], minlength=p) for t in trees)  # per rank, both trees
    peers = children + sum((t >= 0).astype(int) for t in trees)
    return int(peers.max()), int(children.max()), max(_height(t) for t in trees)


def _height(parent: np.ndarray) -> int:
    """Longest walk from a rank up to the root (every rank at once, one level a step)."""
    x, height = np.arange(len(parent)), 0
    while True:
        x = parent[x]
        x = x[x >= 0]
        if not len(x):
            return height
        height += 1


@formula("all_reduce", "hierarchical")
def _ar_hierarchical(m, p, n, s, local_size=None, **_):
    local, nodes = _nodes(p, local_size)
    c_node, c_rail = _cdiv(n, local) * s, _cdiv(n, local * nodes) * s
    intra = (local - 1) * (m.time(1, c_node, c_node) + m.time(1, c_node))
    inter = (nodes - 1) * (m.time(1, c_rail, c_rail) + m.time(1, c_rail))
    return intra + inter


# the blocked collectives' closed forms register themselves on import
from . import formulas_blocked  # noqa: E402, F401


def closed_form(
    collective: str,
    algorithm: str,
    world_size: int,
    count: int,
    machine: Machine,
    itemsize: int = 4,
    **params,
) -> float:
    """Closed-form time of ``algorithm`` for ``count`` elements on ``world_size`` ranks.

    ``count`` means what :class:`~mycollectives.collectives.Spec` says it
    means (a whole vector, or one rank's block); ``params`` are ``segment``
    (elements) and ``local_size``.

    >>> closed_form("all_reduce", "ring", 4, 8, Machine(alpha=1.0, beta=0.0))
    6.0
    """
    if world_size <= 1 or (count == 0 and record(collective).carries_data):  # a barrier costs with no data
        return 0.0
    if (collective, algorithm) not in FORMULAS:
        raise KeyError(f"{collective}/{algorithm} has no closed form (its counted cost needs none)")
    return float(FORMULAS[collective, algorithm](machine, world_size, count, itemsize, **params))
