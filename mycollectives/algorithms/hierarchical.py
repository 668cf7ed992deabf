"""Two-level (hierarchical) all-reduce for nodes of ``local_size`` ranks.

Ranks ``i*L .. i*L+L-1`` share node ``i``. Inside a node links are fast
(NVLink); between nodes they are slow (InfiniBand). The algorithm keeps the
slow links busy with as little data as possible:

1. reduce-scatter inside each node (ring), so local rank ``j`` holds chunk
   ``j`` summed over its node;
2. all-reduce chunk ``j`` across the nodes, among the ranks with local rank
   ``j`` (ring): each rank sends ``1/L`` of the vector over the slow links;
3. all-gather inside each node (ring).
"""

from __future__ import annotations

import numpy as np

from ..schedule import Round, in_parallel, relabel, split
from .all_gather import ring_all_gather
from .reduce_scatter import ring_reduce_scatter
from .registry import Spec, register


def node_size(spec: Spec) -> int:
    """Ranks per node: ``spec.local_size``, else the whole world (one node)."""
    p, local = spec.world_size, spec.local_size or spec.world_size
    if local < 1 or p % local:
        raise ValueError(
            f"hierarchical all_reduce: local_size={local} must divide the world size {p} "
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
