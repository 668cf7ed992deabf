"""Expert parallelism (chapter 5): a mixture-of-experts layer whose tokens travel by all-to-all.

``E`` experts (two-layer MLPs) are spread over ``p`` ranks, ``E / p`` each
(Lepikhin et al. 2021). A router picks each token's top ``k`` experts; then

1. *dispatch*: every (token, expert) pair becomes a row sent to the rank
   that owns the expert, by ``all_to_all_single`` with *uneven* splits
   (routing decides how many rows go where, so the counts are exchanged first);
2. each rank runs its experts on the rows it received;
3. *combine*: the all-to-all back returns each row to where it came from,
   where the ``k`` results of a token are summed with the router's weights.

Backward, the two all-to-alls run again the other way. Each rank sends about
``k T d (p-1)/p`` elements per all-to-all for ``T`` tokens of width ``d``,
four times per layer and step. ``ep_hier.py`` sends them in two hops instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .. import api
from .comm import all_to_all


@dataclass(frozen=True)
class MoEConfig:
    """Width ``d``, expert MLP width ``ffn``, ``experts``, ``top_k``, and ``tokens`` per rank."""

    d: int = 8
    ffn: int = 16
    experts: int = 8
    top_k: int = 2
    tokens: int = 12
    dtype: torch.dtype = torch.float64


def init_moe(cfg: MoEConfig, seed: int = 0) -> dict[str, torch.Tensor]:
    """The router and every expert, the same on every rank."""
    g = torch.Generator().manual_seed(seed)

    def w(*shape: int, fan_in: int) -> torch.Tensor:
        return (torch.randn(*shape, generator=g, dtype=torch.float64) / math.sqrt(fan_in)).to(cfg.dtype)

    return {
        "router": w(cfg.d, cfg.experts, fan_in=cfg.d),
        "w1": w(cfg.experts, cfg.d, cfg.ffn, fan_in=cfg.d),
        "w2": w(cfg.experts, cfg.ffn, cfg.d, fan_in=cfg.ffn),
    }


def tokens(cfg: MoEConfig, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's tokens ``[T, d]`` and a target for the loss."""
    g = torch.Generator().manual_seed(100 + rank)
    x = torch.randn(cfg.tokens, cfg.d, generator=g, dtype=torch.float64)
    return x.to(cfg.dtype), torch.randn(cfg.tokens, cfg.d, generator=g, dtype=torch.float64).to(cfg.dtype)


def route(x: torch.Tensor, router: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Each token's top-``k`` experts ``[T, k]`` and their weights (softmax over the ``k``)."""
    scores, experts = (x @ router).topk(k, dim=-1)
    return experts, scores.softmax(dim=-1)


def expert(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    return torch.relu(x @ w1) @ w2


def moe_reference(x: torch.Tensor, params: dict, k: int) -> torch.Tensor:
    """One process, every expert: ``out[t] = sum_j weight[t, j] expert_{e[t, j]}(x[t])``."""
    experts, weights = route(x, params["router"], k)
    out = torch.zeros_like(x)
    for e in range(params["w1"].shape[0]):
        tok, slot = (experts == e).nonzero(as_tuple=True)
        out = out.index_add(
            0, tok, weights[tok, slot, None] * expert(x[tok], params["w1"][e], params["w2"][e])
        )
    return out


def exchange_counts(in_splits: torch.Tensor, group) -> list[int]:
    """How many rows each rank will send this one: an all-to-all of the counts."""
    out = torch.empty_like(in_splits)
    api.all_to_all_single(out, in_splits.contiguous(), group=group, algorithm="pairwise")
    return out.tolist()


def run_experts(rows: torch.Tensor, ids: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, first: int):
    """Each local expert ``first + e`` on the rows addressed to it."""
    out = torch.zeros_like(rows)
    for e in range(w1.shape[0]):
        mask = ids == first + e
        out = out.index_put((mask,), expert(rows[mask], w1[e], w2[e]))
    return out


def moe_ep(x: torch.Tensor, router: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, k: int, group=None):
    """This rank's tokens through experts spread over ``group`` (``w1, w2``: its own experts)."""
    p, r, local = api.get_world_size(group), api.get_rank(group), w1.shape[0]
    experts, weights = route(x, router, k)  # [T, k]
    flat = experts.reshape(-1)  # one entry per (token, choice)
    order = flat.argsort(stable=True)  # grouped by expert, hence by owning rank
    in_splits = torch.bincount(flat // local, minlength=p)
    out_splits = exchange_counts(in_splits, group)
    in_s = in_splits.tolist()
    ids = torch.empty(sum(out_splits), dtype=flat.dtype)
    api.all_to_all_single(ids, flat[order].contiguous(), out_splits, in_s, group=group, algorithm="pairwise")
    rows = all_to_all(x.repeat_interleave(k, dim=0)[order], out_splits, in_s, group)  # dispatch
    y = run_experts(rows, ids, w1, w2, r * local)
    back = all_to_all(y, in_s, out_splits, group)  # combine: rows return in the order they left
    unsorted = torch.empty_like(back).index_copy(0, order, back)
    return (unsorted.view(-1, k, x.shape[1]) * weights[..., None]).sum(dim=1)
