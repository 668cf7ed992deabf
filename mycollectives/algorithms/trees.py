"""The pipelined double binary tree all-reduce, as NCCL builds it.

A binary tree halves the latency of a chain but leaves every leaf's link
idle half the time. NCCL (Jeaugey 2019) runs two binary trees at once, each on
half of the vector, laid out so that the leaves of one are the inner nodes of
the other: every rank sends and receives about as much as in a ring, in
``O(log p)`` steps plus the pipeline's depth.
"""

from __future__ import annotations

import numpy as np

from ..schedule import Chunks, Round, in_parallel, num_segments, split
from .registry import Spec, register


def btree_parents(k: int) -> np.ndarray:
    """Parent of each rank in NCCL's binary tree over ``0..k-1`` (root 0: -1).

    A rank's parent clears its lowest set bit and sets the next one up
    (or just clears it, if that lands past the end): odd ranks are leaves.
    """
    r = np.arange(k, dtype=np.int64)
    bit = r & -r  # lowest set bit (0 for the root)
    up = (r ^ bit) | (bit << 1)
    parent = np.where(up < k, up, r ^ bit)
    parent[:1] = -1
    return parent


def mirrored_parents(k: int) -> np.ndarray:
    """The second tree: the first mirrored (even ``k``) or shifted by one rank
    (odd), as NCCL 2.30.7's ``ncclGetDtree`` builds it (``src/graph/trees.cc``;
    NCCL 2.4 did the opposite). Either way every inner node of the first tree
    is a leaf of the second when ``k`` is even."""
    first = btree_parents(k)
    pos = k - 1 - np.arange(k) if k % 2 == 0 else (np.arange(k) - 1) % k  # rank -> position
    rank_at = np.argsort(pos)  # position -> rank
    parent_pos = first[pos]
    return np.where(parent_pos < 0, -1, rank_at[np.maximum(parent_pos, 0)])


def _heights_depths(parent: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    k = len(parent)
    depth = np.zeros(k, dtype=np.int64)
    for r in range(k):  # walk up; trees are shallow
        x = r
        while parent[x] >= 0:
            depth[r] += 1
            x = parent[x]
    height = np.zeros(k, dtype=np.int64)
    for r in np.argsort(-depth):  # deepest first: children before parents
        if parent[r] >= 0:
            height[parent[r]] = max(height[parent[r]], height[r] + 1)
    return height, depth


def pipelined_tree_all_reduce(parent: np.ndarray, segments: Chunks) -> list[Round]:
    """Reduce up the tree and broadcast down it, one segment per round per edge.

    A rank of height ``h`` sends segment ``s`` to its parent in round ``s + h``,
    once both children have added theirs; the root of height ``H`` starts
    sending ``s`` down in round ``s + H``, and a rank at depth ``d`` passes it
    on in round ``s + H + d``.
    """
    height, depth = _heights_depths(parent)
    root_h = int(height[parent < 0][0])
    child = np.flatnonzero(parent >= 0)
    nseg = len(segments)
    rounds = []
    for t in range(nseg + 2 * root_h):
        s_up = t - height[child]
        up = (s_up >= 0) & (s_up < nseg)
        s_down = t - root_h - depth[child] + 1  # the parent sends at s + H + depth(parent)
        down = (s_down >= 0) & (s_down < nseg)
        rounds.append(
            Round.cat(
                [
                    Round.of(child[up], parent[child[up]], *segments[s_up[up]], reduce=True),
                    Round.of(parent[child[down]], child[down], *segments[s_down[down]]),
                ]
            )
        )
    return rounds


@register("all_reduce", "double_binary_tree", uses=("segment",))
def double_binary_tree(spec: Spec) -> list[Round]:
    p, n = spec.world_size, spec.count
    if p == 1:
        return []
    halves = split(n, 2)
    trees = []
    for parent, (off, cnt) in zip(
        (btree_parents(p), mirrored_parents(p)), zip(halves.offsets, halves.counts)
    ):
        segments = split(int(cnt), num_segments(int(cnt), spec.segment), int(off))
        trees.append(pipelined_tree_all_reduce(parent, segments))
    return in_parallel(*trees)
