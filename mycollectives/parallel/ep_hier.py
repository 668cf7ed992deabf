"""Hierarchical expert dispatch (chapter 5): the network once per node, then NVLink.

A flat dispatch (:mod:`.ep`) sends one row per (token, expert): a token whose
``k`` experts sit on two GPUs of another node crosses the network twice.
DeepSeek-V3's all-to-all kernels, released as DeepEP's "normal" kernels,
send each token across the network at most once per destination node, to
the GPU with the same local index there (same rail, no spine), which
forwards it over NVLink to the GPUs holding its experts (DeepSeek-AI 2024).
The combine runs the way back: the experts' weighted outputs for a token
are summed inside the node first (NVLink), and one partial sum per node
crosses the network home. On a mesh ``{"node": N, "local": L}``:

==========  ============================================  ==================
stage       what moves                                    group
==========  ============================================  ==================
dispatch A  one row per (token, node), with the weights    ``node`` (a rail)
dispatch B  one row per (row, GPU of that node)            ``local`` (NVLink)
experts     each GPU weighs and sums its experts' outputs
combine B   one partial sum per (row, GPU) back            ``local``
combine A   one partial sum per (token, node) home         ``node``
==========  ============================================  ==================

The router's weights travel with the token (they multiply the expert
outputs where the experts are), so their gradient comes back the same way.
"""

from __future__ import annotations

import torch

from .. import api
from .comm import all_to_all
from .ep import exchange_counts, expert, route
from .mesh import Mesh


def _send_ids(ids: torch.Tensor, out_splits: list[int], in_splits: list[int], group) -> torch.Tensor:
    out = ids.new_empty(sum(out_splits), *ids.shape[1:])
    api.all_to_all_single(out, ids.contiguous(), out_splits, in_splits, group=group, algorithm="pairwise")
    return out


def _hop(x, w, ids, dest, n_dest: int, group):
    """One hop: a row per (row of ``x``, distinct ``dest`` among its ``k`` slots),
    carrying the weights and expert ids of the slots bound there."""
    hit = torch.zeros(x.shape[0], n_dest, dtype=torch.bool)
    valid = dest >= 0
    hit[torch.arange(x.shape[0])[:, None].expand_as(dest)[valid], dest[valid]] = True
    row, to = hit.nonzero(as_tuple=True)
    order = to.argsort(stable=True)
    row, to = row[order], to[order]
    on = dest[row] == to[:, None]  # [rows, k]: the slots whose expert is there
    payload = torch.cat([x[row], torch.where(on, w[row], torch.zeros_like(w[row]))], dim=1)
    in_splits = torch.bincount(to, minlength=n_dest)
    out_splits = exchange_counts(in_splits, group)
    in_s = in_splits.tolist()
    got_ids = _send_ids(torch.where(on, ids[row], -1), out_splits, in_s, group)
    got = all_to_all(payload, out_splits, in_s, group)
    d = x.shape[1]
    return got[:, :d], got[:, d:], got_ids, (row, in_s, out_splits)


def _back(y, route_info, n_rows: int, group):
    """The way back of one hop: each row's result returns and is summed into its source row."""
    row, in_s, out_s = route_info
    back = all_to_all(y, in_s, out_s, group)
    return torch.zeros(n_rows, y.shape[1], dtype=y.dtype).index_add(0, row, back)


def moe_hierarchical(x, router, w1, w2, k: int, mesh: Mesh) -> torch.Tensor:
    """This rank's tokens through experts spread over ``mesh`` (``{"node": N, "local": L}``)."""
    n_nodes, per_node = mesh.shape["node"], mesh.shape["local"]
    local = w1.shape[0]  # experts per GPU
    rail, nvlink = mesh.group("node"), mesh.group("local")
    experts, weights = route(x, router, k)
    # dispatch A: across the network, once per destination node, to the same local index
    xa, wa, ida, hop_a = _hop(x, weights, experts, experts // local // per_node, n_nodes, rail)
    # dispatch B: inside the node, once per GPU that holds one of the row's experts
    gpu = torch.where(ida >= 0, (ida // local) % per_node, -1)
    xb, wb, idb, hop_b = _hop(xa, wa, ida, gpu, per_node, nvlink)
    # the experts: each GPU sums its experts' weighted outputs per row
    first = mesh.rank * local
    yb = torch.zeros_like(xb)
    for e in range(local):
        mine = idb == first + e  # [rows, k]
        rows = mine.any(dim=1)
        weight = (wb * mine).sum(dim=1)
        yb = yb.index_put((rows,), weight[rows, None] * expert(xb[rows], w1[e], w2[e]), accumulate=True)
    ya = _back(yb, hop_b, xa.shape[0], nvlink)  # combine B: partial sums inside the node
    return _back(ya, hop_a, x.shape[0], rail)  # combine A: one row per node crosses the network
