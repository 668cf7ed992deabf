"""The traffic of NCCL's algorithms, channel by channel (chapter 4, "Channels").

NCCL cuts a collective into *channels*, each running the whole algorithm on
its own slice of the buffer with its own peers, so a node's traffic spreads
over every NVLink and every NIC. Each function here lays out one of NCCL's
algorithms on ``nodes`` NVLink domains of ``local`` ranks and returns its
:class:`Traffic`: GPU-to-GPU *hops* with the bytes each carries per byte of
the collective (nccl-tests' size), plus the bytes each GPU pushes into and
pulls out of a switch that reduces (NVLink SHARP inside a node, SHARP in the
network). The pipelines keep every hop busy at once, so
:mod:`mycollectives.sim.nccl` prices the whole collective by the link that
carries the most.

Layouts follow NCCL's source (``nccl_connect``, ``nccl_trees``): a ring channel
enters a node through the NIC of its first GPU, visits every GPU over
NVLink, and leaves through the same NIC (the last GPU hands its data over
NVLink to the first one, PXN), so every ring stays on one rail; a tree channel
is a chain inside the node and one of two mirrored binary trees across nodes
(``ncclGetDtree``); NVLS has ``heads`` GPUs (one per GPU of a host, at most 32)
that each reduce their share in the switch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Traffic:
    """Hops ``src -> dst`` (through ``via`` over NVLink first when ``via >= 0``) carrying
    ``weight`` bytes per byte of the collective; per-GPU bytes into (``up``) and out of
    (``down``) a reducing switch, inside the node (``switch``) or in the network (``net``)."""

    src: np.ndarray
    dst: np.ndarray
    via: np.ndarray
    weight: np.ndarray
    switch_up: np.ndarray | None = None
    switch_down: np.ndarray | None = None
    net_up: np.ndarray | None = None
    net_down: np.ndarray | None = None

    @staticmethod
    def of(p: int, hops=(), **flows) -> Traffic:
        parts = [
            tuple(np.asarray(x, np.int64 if i < 3 else float).ravel() for i, x in enumerate(h)) for h in hops
        ]
        cols = [np.concatenate([h[i] for h in parts]) if parts else np.zeros(0) for i in range(4)]
        src, dst, via, w = (
            cols[0].astype(np.int64),
            cols[1].astype(np.int64),
            cols[2].astype(np.int64),
            cols[3],
        )
        keep = (src != dst) & (w > 0)
        src, dst, via, w = src[keep], dst[keep], via[keep], w[keep]
        if len(src):  # merge repeated hops: channels that share a ring carry its bytes together
            key = (src * p + dst) * (p + 1) + (via + 1)
            key, inv = np.unique(key, return_inverse=True)
            w = np.bincount(inv, weights=w)
            via, rest = key % (p + 1) - 1, key // (p + 1)
            src, dst = rest // p, rest % p
        return Traffic(src, dst, via, w, **flows)


def _gpu(node, local, gpus_per_node: int):
    return np.asarray(node) * gpus_per_node + np.asarray(local)


def ring(nodes: int, local: int, gpn: int, channels: int, per_hop: float, nic_gpus: int) -> Traffic:
    """Rings of ``channels`` channels over ``nodes`` x ``local`` ranks; each hop of a channel
    carries ``per_hop`` (bytes per collective byte, all channels together). Channel ``c``
    starts at the GPU of NIC ``c``; ``nic_gpus`` GPUs share one NIC."""
    starts = (np.arange(channels) % max(local // nic_gpus, 1)) * nic_gpus % local
    start, count = np.unique(starts, return_counts=True)
    w = per_hop * count / channels  # (starts,)
    j = np.arange(local)
    order = (start[:, None] + j[None, :]) % local  # (starts, local): the ring inside a node
    n = np.arange(nodes)
    hops = []
    if local > 1:  # inside each node: order[j] -> order[j + 1]
        s = _gpu(n[None, :, None], order[:, None, :-1], gpn)
        d = _gpu(n[None, :, None], order[:, None, 1:], gpn)
        hops.append((s, d, np.full(s.shape, -1), np.broadcast_to(w[:, None, None], s.shape)))
    first, last = order[:, 0][:, None], order[:, -1][:, None]
    if nodes > 1:  # leave through the first GPU's NIC (PXN), enter the next node at its first GPU
        s, d = _gpu(n[None, :], last, gpn), _gpu((n[None, :] + 1) % nodes, first, gpn)
        via = np.where(local > 1, _gpu(n[None, :], first, gpn), -1)
        hops.append((s, d, np.broadcast_to(via, s.shape), np.broadcast_to(w[:, None], s.shape)))
    elif local > 1:
        hops.append((last, first, np.full(first.shape, -1), w[:, None]))
    return Traffic.of(nodes * gpn, hops)


def dtree(nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """NCCL's double binary tree over nodes: parent of each node in tree 0 and tree 1 (-1: root).

    Tree 0 is ``ncclGetBtree``; tree 1 mirrors it for an even count and shifts it by
    one for an odd count (``src/graph/trees.cc`` 32-112, ``nccl_trees``)."""
    r = np.arange(nodes)
    bit = r & -r
    up = (r ^ bit) | (bit << 1)
    first = np.where(r == 0, -1, np.where(up < nodes, up, r ^ bit))
    if nodes % 2:  # shift: node r sits where node r - 1 sits in tree 0
        pos = (r - 1) % nodes
        second = np.where(first[pos] < 0, -1, (first[pos] + 1) % nodes)
    else:  # mirror
        pos = nodes - 1 - r
        second = np.where(first[pos] < 0, -1, nodes - 1 - first[pos])
    return first, second


def tree(nodes: int, local: int, gpn: int, channels: int, nic_gpus: int, chain_only: bool = False) -> Traffic:
    """NCCL's Tree all-reduce: half the channels on each tree of :func:`dtree`; inside a node
    a chain from the channel's NIC GPU; each edge carries the channel's share up (reduce)
    and down (broadcast)."""
    hops = []
    n = np.arange(nodes)
    parents = dtree(nodes)
    half = max(channels // 2, 1)
    for c in range(channels):
        w = 1.0 / channels
        head = (c % half % max(local // nic_gpus, 1)) * nic_gpus % local
        order = (head + np.arange(local)) % local
        if local > 1:
            a, b = _gpu(n[:, None], order[None, :-1], gpn), _gpu(n[:, None], order[None, 1:], gpn)
            hops += [
                (a, b, np.full(a.shape, -1), np.full(a.shape, w)),
                (b, a, np.full(a.shape, -1), np.full(a.shape, w)),
            ]
        if nodes > 1 and not chain_only:
            parent = parents[0 if c < half else 1]
            child = n[parent >= 0]
            a, b = _gpu(child, head, gpn), _gpu(parent[child], head, gpn)
            hops += [
                (a, b, np.full(a.shape, -1), np.full(a.shape, w)),
                (b, a, np.full(a.shape, -1), np.full(a.shape, w)),
            ]
    return Traffic.of(nodes * gpn, hops)


def nvls(nodes: int, local: int, gpn: int, heads: int, kind: str = "all_reduce") -> Traffic:
    """NVLink SHARP inside each node. All-reduce: every GPU's vector is read by the switch
    and the sum multicast back (1 each way), and each of ``heads`` GPUs also pulls and
    pushes its 1/heads share of the sum; all-gather: each GPU pushes its block, receives
    all; reduce-scatter: the switch reads everything, each GPU receives its block."""
    p = nodes * gpn
    up, down = np.zeros(p), np.zeros(p)
    ranks = _gpu(np.arange(nodes)[:, None], np.arange(local)[None, :], gpn).ravel()
    head = ranks[(ranks % gpn) < heads]
    if kind == "all_reduce":
        up[ranks] = down[ranks] = 1.0
        up[head] += 1.0 / heads
        down[head] += 1.0 / heads
    elif kind == "all_gather":
        up[ranks], down[ranks] = 1.0 / local, 1.0
    else:  # reduce_scatter
        up[ranks], down[ranks] = 1.0, 1.0 / local
    return Traffic.of(p, switch_up=up, switch_down=down)


def nvls_tree(nodes: int, local: int, gpn: int, heads: int, nic_gpus: int) -> Traffic:
    """NVLS inside each node, then the double binary tree across nodes between the GPUs
    that own a NIC, each for its share of the vector, half on each tree."""
    inside = nvls(nodes, local, gpn, heads)
    nic_owners = np.arange(0, local, nic_gpus)
    share = 1.0 / len(nic_owners)
    n = np.arange(nodes)
    hops = []
    for parent in dtree(nodes):
        child = n[parent >= 0]
        a, b = (
            _gpu(child[:, None], nic_owners[None, :], gpn),
            _gpu(parent[child][:, None], nic_owners[None, :], gpn),
        )
        w = np.full(a.shape, share / 2)
        hops += [(a, b, np.full(a.shape, -1), w), (b, a, np.full(a.shape, -1), w)]
    out = Traffic.of(nodes * gpn, hops)
    out.switch_up, out.switch_down = inside.switch_up, inside.switch_down
    return out


def collnet(nodes: int, local: int, gpn: int, channels: int, nic_gpus: int, direct: bool) -> Traffic:
    """SHARP in the network. Chain: a chain inside the node to the channel's NIC GPU, which
    sends its share to the switch and gets the sum back. Direct: every GPU scatters 1/heads to
    each NIC GPU, which reduces, exchanges with the switch and sends the result to every GPU."""
    p = nodes * gpn
    up = np.zeros(p)
    owners = np.arange(0, local, nic_gpus)
    n = np.arange(nodes)
    if direct:
        share = 1.0 / len(owners)
        g = _gpu(n[:, None, None], np.arange(local)[None, :, None], gpn)
        h = _gpu(n[:, None, None], owners[None, None, :], gpn)
        g, h = np.broadcast_arrays(g, h)
        w = np.full(g.shape, share)
        out = Traffic.of(p, [(g, h, np.full(g.shape, -1), w), (h, g, np.full(g.shape, -1), w)])
        up[_gpu(n[:, None], owners[None, :], gpn).ravel()] = share
    else:
        out = tree(nodes, local, gpn, channels, nic_gpus, chain_only=True)
        half = max(channels // 2, 1)
        for c in range(channels):
            head = (c % half % len(owners)) * nic_gpus % local
            up[_gpu(n, head, gpn)] += 1.0 / channels
    out.net_up, out.net_down = up, up.copy()
    return out


def pat(p: int, kind: str = "all_gather") -> Traffic:
    """PAT with one rank per node, fully aggregated: in round ``d`` rank ``r`` sends to
    ``r - 2^d`` (all-gather; ``r + 2^d`` for reduce-scatter) the blocks it holds at offsets
    0, 2^(d+1), ... below ``p - 2^d`` (``jeaugey2025pat``); ``p - 1`` blocks in all."""
    r = np.arange(p)
    hops = []
    d = 1
    while d < p:
        blocks = (p - 1 - d) // (2 * d) + 1
        dst = (r - d) % p if kind == "all_gather" else (r + d) % p
        hops.append((r, dst, np.full(p, -1), np.full(p, blocks / p)))
        d *= 2
    return Traffic.of(p, hops)


def all_to_all(nodes: int, local: int, gpn: int) -> Traffic:
    """Every rank sends 1/p of its buffer to every other; across nodes over NVLink to the GPU
    on the destination's rail first, then along that rail (PXN, ``nccl_pxn``)."""
    p = nodes * local
    g = np.arange(local)
    n = np.arange(nodes)
    hops = []
    a, b = _gpu(n[:, None, None], g[None, :, None], gpn), _gpu(n[:, None, None], g[None, None, :], gpn)
    a, b = np.broadcast_arrays(a, b)
    hops.append((a, b, np.full(a.shape, -1), np.full(a.shape, 1.0 / p)))  # inside the node
    if nodes > 1:
        # rank (n, l) -> (m, k): NVLink (n, l) -> (n, k), then rail k from node n to node m
        hops.append((a, b, np.full(a.shape, -1), np.full(a.shape, (nodes - 1) / p)))
        m = (n[:, None] + np.arange(1, nodes)[None, :]) % nodes  # (nodes, nodes - 1)
        s = _gpu(n[:, None, None], g[None, None, :], gpn)
        d = _gpu(m[:, :, None], g[None, None, :], gpn)
        s, d = np.broadcast_arrays(s, d)
        hops.append((s, d, np.full(s.shape, -1), np.full(s.shape, local / p)))
    return Traffic.of(nodes * gpn, hops)
