"""Tensor parallelism, Megatron-LM style (chapter 5): column-parallel, then row-parallel.

Each of ``t`` ranks holds ``heads / t`` attention heads (columns of
``wq, wk, wv``, the matching rows of ``wo``) and ``ffn / t`` columns of the
MLP's ``w1`` with the matching rows of ``w2`` (Shoeybi et al. 2019). A
column-parallel layer needs its whole input on every rank; a row-parallel
layer leaves each rank with a partial sum of its output. So each sub-block
(attention, MLP) communicates once each way:

- forward: ``reduce_from`` all-reduces the row-parallel layer's partial sums;
- backward: ``copy_to`` all-reduces the gradient of the column-parallel
  layer's input (each rank's branch saw only its heads' share of it).

Per layer and micro-batch that is four all-reduces of ``s b h`` elements:
two in the forward pass and two in the backward pass.
"""

from __future__ import annotations

import torch

from .. import api
from .comm import copy_to, reduce_from
from .model import BlockConfig, Params, attention_core, heads, merge_heads, rms_norm

COLUMN = ("wq", "wk", "wv", "w1")  # split along the output dimension
ROW = ("wo", "w2")  # split along the input dimension


def shard_tp(params: Params, rank: int, t: int) -> Params:
    """Rank ``rank``'s slices of every layer (norm gains stay whole)."""
    out = []
    for p in params:
        q = {}
        for name, w in p.items():
            if name in COLUMN:
                q[name] = w.chunk(t, dim=1)[rank]
            elif name in ROW:
                q[name] = w.chunk(t, dim=0)[rank]
            else:
                q[name] = w
        out.append({k: v.detach().clone().requires_grad_() for k, v in q.items()})
    return out


def tp_attention(p: dict, a: torch.Tensor, n_local: int, pos: torch.Tensor) -> torch.Tensor:
    """This rank's heads of attention on the whole input ``a``: a *partial* output."""
    q, k, v = (heads(a @ p[w], n_local) for w in ("wq", "wk", "wv"))
    return merge_heads(attention_core(q, k, v, pos, pos)) @ p["wo"]


def tp_block(p: dict, x: torch.Tensor, cfg: BlockConfig, group) -> torch.Tensor:
    """One layer on ``t`` ranks: ``x`` ``[s, b, d]`` is whole (replicated) on every rank."""
    t = _size(group, cfg)
    pos = torch.arange(x.shape[0])
    a = copy_to(rms_norm(x, p["norm1"]), group)  # backward: all-reduce
    h = x + reduce_from(tp_attention(p, a, cfg.heads // t, pos), group)  # forward: all-reduce
    m = copy_to(rms_norm(h, p["norm2"]), group)
    return h + reduce_from(torch.nn.functional.gelu(m @ p["w1"]) @ p["w2"], group)


def tp_forward(params: Params, x: torch.Tensor, cfg: BlockConfig, group) -> torch.Tensor:
    for p in params:
        x = tp_block(p, x, cfg, group)
    return x


def _size(group, cfg: BlockConfig) -> int:
    t = api.get_world_size(group)
    if cfg.heads % t or cfg.ffn % t:
        raise ValueError(
            f"tensor parallelism over {t} ranks needs heads ({cfg.heads}) and ffn ({cfg.ffn}) divisible by {t}"
        )
    return t
