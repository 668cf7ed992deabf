"""Two-level (hierarchical) algorithms for nodes of ``local_size`` ranks (chapter 4).

Ranks ``i*L .. i*L+L-1`` share node ``i``; the ranks with local rank ``j``
on every node form *rail* ``j``. Inside a node links are fast (NVLink);
between nodes they are slow (InfiniBand). The algorithms keep the slow links
busy with as little data as possible.

The all-reduce:

1. reduce-scatter inside each node (ring), so local rank ``j`` holds chunk
   ``j`` summed over its node;
2. all-reduce chunk ``j`` across the nodes, among the ranks with local rank
   ``j`` (ring): each rank sends ``1/L`` of the vector over the slow links;
3. all-gather inside each node (ring).

The reduce-scatter is its first half, inside the node and then across: the
ring inside a node reduces *bundles* (bundle ``j`` holds the blocks of rail
``j``, one per node), then a ring along each rail reduces the bundle's
blocks, so that each rank sends ``nodes - 1`` blocks over the network. The
all-gather is the reduce-scatter run backwards: across the nodes along the
rails first (each rank's own block), then inside the node.
"""

from __future__ import annotations

import numpy as np

from ..schedule import Round, in_parallel, mirror, relabel, split
from .all_gather import ring_all_gather
from .reduce_scatter import ring_reduce_scatter
from .registry import Spec, register


def node_size(spec: Spec) -> int:
    """Ranks per node: ``spec.local_size``, else the whole world (one node)."""
    p, local = spec.world_size, spec.local_size or spec.world_size
    if local < 1 or p % local:
        raise ValueError(
            f"hierarchical {spec.collective}: local_size={local} must divide the world size {p} "
            "(set local_size= or LOCAL_WORLD_SIZE to the ranks per node)"
        )
    return local


@register("all_reduce", "hierarchical", uses=("local_size",))
def hierarchical(spec: Spec) -> list[Round]:
    p, n = spec.world_size, spec.count
    local = node_size(spec)
    nodes = p // local
    chunks = split(n, local)  # chunk j is reduced across nodes by local rank j
    node_ranks = [np.arange(i * local, (i + 1) * local) for i in range(nodes)]
    rail_ranks = [np.arange(j, p, local) for j in range(local)]

    intra_rs = in_parallel(*(relabel(ring_reduce_scatter(local, chunks), r) for r in node_ranks))
    inter = []
    for j, ranks in enumerate(rail_ranks):
        off, cnt = chunks[j]
        sub = split(int(cnt), nodes, int(off))
        inter.append(relabel(ring_reduce_scatter(nodes, sub) + ring_all_gather(nodes, sub), ranks))
    intra_ag = in_parallel(*(relabel(ring_all_gather(local, chunks), r) for r in node_ranks))
    return intra_rs + in_parallel(*inter) + intra_ag


def two_level_reduce_scatter(p: int, local: int, n: int) -> list[Round]:
    """Ring reduce-scatter of rail bundles inside each node, then of blocks along each rail.

    Rank ``(i, j)`` (node ``i``, local rank ``j``, rank ``i*L + j``) ends with
    block ``i*L + j`` (``n`` elements at ``(i*L + j) * n``) summed over all ranks.
    """
    nodes = p // local
    node, j = np.divmod(np.arange(p), local)
    rounds = []
    for step in range(local - 1):  # inside: bundle b = blocks b, L+b, 2L+b, ... of every node
        bundle = (j - step - 1) % local
        blocks = np.arange(nodes)[None, :] * local + bundle[:, None]  # (rank, node)
        right = node * local + (j + 1) % local
        rounds.append(Round.of(np.arange(p)[:, None], right[:, None], blocks * n, n, reduce=True))
    for step in range(nodes - 1):  # across: along rail j, the ring over nodes, one block a step
        block = ((node - step - 1) % nodes) * local + j
        rounds.append(Round.of(np.arange(p), ((node + 1) % nodes) * local + j, block * n, n, reduce=True))
    return rounds


@register("reduce_scatter", "hierarchical", uses=("local_size",))
def hierarchical_reduce_scatter(spec: Spec) -> list[Round]:
    return two_level_reduce_scatter(spec.world_size, node_size(spec), spec.count)


@register("all_gather", "hierarchical", uses=("local_size",))
def hierarchical_all_gather(spec: Spec) -> list[Round]:
    return mirror(two_level_reduce_scatter(spec.world_size, node_size(spec), spec.count), reduce=False)
