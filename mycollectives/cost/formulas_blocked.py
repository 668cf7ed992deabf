"""Closed forms of the blocked collectives, ``n`` one rank's block (chapters 3 and 3b).

All-gather, reduce-scatter, scatter, gather, all-to-all and the barrier; the
rooted ones and all-reduce are in :mod:`~mycollectives.cost.formulas`, which
imports this module (so every form is in ``FORMULAS``, :mod:`.forms`) and explains the
notation.
"""

from __future__ import annotations

from ..schedule import ceil_log2, floor_pow2
from .forms import _binomial_blocks, _cdiv, _nodes, _recursive, formula

# --- all-gather and reduce-scatter (n = one rank's block) -------------------


@formula("all_gather", "ring")
@formula("all_gather", "direct")
def _ag_ring(m, p, n, s, **_):
    return (p - 1) * m.time(1, n * s)


@formula("all_gather", "recursive_doubling")
def _ag_rd(m, p, n, s, **_):
    e = p - floor_pow2(p)
    return _recursive(m, p, n * s, False) + (e > 0) * (m.time(1, n * s) + m.time(1, (p - 1) * n * s))


@formula("all_gather", "bruck")
def _ag_bruck(m, p, n, s, **_):
    return ceil_log2(p) * m.alpha + _binomial_blocks(p) * n * s * m.beta


def _pat_messages(p: int, n: int, segment) -> int:
    """PAT's messages per rank: each distance's blocks, ``A`` to a message."""
    from ..algorithms.pat import aggregation, offsets_at
    from ..algorithms.registry import DEFAULT_SEGMENT_BYTES

    a = aggregation(p, n, segment or DEFAULT_SEGMENT_BYTES // 4)
    return sum(_cdiv(len(offsets_at(p, d)), a) for d in range(ceil_log2(p)))


@formula("all_gather", "pat")
def _ag_pat(m, p, n, s, segment=None, **_):
    """``M alpha + (p-1) b beta``: Bruck's cost when every distance fits one message
    (``M = ceil(log2 p)``), the ring's when a message holds one block (``M = p-1``)."""
    return _pat_messages(p, n, segment) * m.alpha + (p - 1) * n * s * m.beta


@formula("reduce_scatter", "pat")
def _rs_pat(m, p, n, s, segment=None, **_):
    return _pat_messages(p, n, segment) * m.alpha + (p - 1) * n * s * (m.beta + m.gamma)


def _two_level(m, p, n, s, local_size, reduce: bool):
    """Inside the node ``L-1`` steps of a bundle of ``p/L`` blocks, then ``p/L - 1`` of one block."""
    local, nodes = _nodes(p, local_size)
    b = n * s
    red = 1.0 if reduce else 0.0
    return (local - 1) * m.time(1, nodes * b, red * nodes * b) + (nodes - 1) * m.time(1, b, red * b)


@formula("all_gather", "hierarchical")
def _ag_hierarchical(m, p, n, s, local_size=None, **_):
    return _two_level(m, p, n, s, local_size, reduce=False)


@formula("reduce_scatter", "hierarchical")
def _rs_hierarchical(m, p, n, s, local_size=None, **_):
    return _two_level(m, p, n, s, local_size, reduce=True)


@formula("reduce_scatter", "ring")
@formula("reduce_scatter", "pairwise")
@formula("reduce_scatter", "direct")
def _rs_ring(m, p, n, s, **_):
    return (p - 1) * m.time(1, n * s, n * s)


@formula("reduce_scatter", "recursive_halving")
def _rs_rh(m, p, n, s, **_):
    e = p - floor_pow2(p)
    folds = (e > 0) * (m.time(1, p * n * s, p * n * s) + m.time(1, n * s))
    return folds + _recursive(m, p, n * s, True)


# --- scatter, gather, all-to-all (n = one block), barrier -------------------


@formula("scatter", "linear")
@formula("gather", "linear")
def _linear_blocks(m, p, n, s, **_):
    return (p - 1) * m.time(1, n * s)


@formula("scatter", "binomial")
@formula("gather", "binomial")
def _binomial_tree_blocks(m, p, n, s, **_):
    return ceil_log2(p) * m.alpha + _binomial_blocks(p) * n * s * m.beta


@formula("all_to_all", "linear")
@formula("all_to_all", "pairwise")
def _a2a_direct(m, p, n, s, **_):
    return (p - 1) * m.time(1, n * s)


@formula("all_to_all", "bruck")
def _a2a_bruck(m, p, n, s, **_):
    """Round ``k`` moves the slots whose index has bit ``k`` set."""
    moved = [(p >> (k + 1) << k) + max(0, p % (2 << k) - (1 << k)) for k in range(ceil_log2(p))]
    return sum(m.time(1, j * n * s) for j in moved)


@formula("barrier", "dissemination")
def _barrier(m, p, n, s, **_):
    return ceil_log2(p) * m.time(1, s)
