"""Sequence parallelism (chapter 5): tensor parallelism whose all-reduces are split in two.

Korthikanti et al. (2023) noticed that an all-reduce is a reduce-scatter
followed by an all-gather, and that between the two, the norm and the
residual connection work on each token separately. So the activations
*between* the tensor-parallel regions can live sharded along the sequence:
each of ``t`` ranks keeps ``s / t`` tokens. Per sub-block:

- before the column-parallel layer, :func:`gather_matmul` all-gathers the
  sequence (backward: reduce-scatter of the input's gradient);
- after the row-parallel layer, ``scatter_rows`` reduce-scatters the
  partial sums onto the sequence shards (backward: all-gather).

The bytes are those of the all-reduce they replace: ``(t-1)/t n`` for each
half. What changes is memory: the norms' inputs and the residual stream are
stored ``t`` times smaller. The column-parallel matmul needs the *whole*
input in its backward pass (for its weight's gradient); ``regather=True``
keeps only the shard and all-gathers it again in the backward pass, as
Megatron-LM does, which saves that memory too for one more all-gather.

The norm gains see only this rank's tokens, so their gradients are partial:
:func:`sync_norm_grads` all-reduces them after the backward pass.
"""

from __future__ import annotations

import torch

from .. import api
from .comm import all_gather_rows, all_reduce_, reduce_scatter_rows, scatter_rows
from .model import BlockConfig, Params, attention_core, heads, merge_heads, rms_norm


class _GatherMatmul(torch.autograd.Function):
    """``all_gather_rows(x) @ w``; with ``regather`` only the shard ``x`` is saved."""

    @staticmethod
    def forward(ctx, x, w, group, regather: bool):
        total = all_gather_rows(x, group)
        ctx.group, ctx.regather = group, regather
        ctx.save_for_backward(x if regather else total, w)
        return total @ w

    @staticmethod
    def backward(ctx, grad):
        saved, w = ctx.saved_tensors
        total = all_gather_rows(saved, ctx.group) if ctx.regather else saved
        grad_w = total.reshape(-1, total.shape[-1]).T @ grad.reshape(-1, grad.shape[-1])
        grad_x = reduce_scatter_rows(grad @ w.T, ctx.group)
        return grad_x, grad_w, None, None


def gather_matmul(x: torch.Tensor, w: torch.Tensor, group, regather: bool = True) -> torch.Tensor:
    """Column-parallel matmul of a sequence-sharded input ``x`` ``[s/t, b, d]`` -> ``[s, b, f/t]``."""
    return _GatherMatmul.apply(x, w, group, regather)


def sp_block(p: dict, x: torch.Tensor, cfg: BlockConfig, group, regather: bool = True) -> torch.Tensor:
    """One layer on ``t`` ranks: ``x`` ``[s/t, b, d]`` is this rank's block of the sequence."""
    t = api.get_world_size(group)
    n_local = cfg.heads // t
    w_qkv = torch.cat([p["wq"], p["wk"], p["wv"]], dim=1)  # one gather feeds all three
    qkv = gather_matmul(rms_norm(x, p["norm1"]), w_qkv, group, regather)  # [s, b, 3 d/t]
    q, k, v = (heads(u, n_local) for u in qkv.chunk(3, dim=-1))
    pos = torch.arange(qkv.shape[0])
    h = x + scatter_rows(merge_heads(attention_core(q, k, v, pos, pos)) @ p["wo"], group)
    up = gather_matmul(rms_norm(h, p["norm2"]), p["w1"], group, regather)
    return h + scatter_rows(torch.nn.functional.gelu(up) @ p["w2"], group)


def sp_forward(params: Params, x: torch.Tensor, cfg: BlockConfig, group, regather: bool = True):
    for p in params:
        x = sp_block(p, x, cfg, group, regather)
    return x


def sync_norm_grads(params: Params, group) -> None:
    """Sum the norm gains' gradients over the sequence shards (one small all-reduce)."""
    flat = torch.cat([p[n].grad for p in params for n in ("norm1", "norm2")])
    all_reduce_(flat, group)
    at = 0
    for p in params:
        for n in ("norm1", "norm2"):
            g = p[n].grad
            g.copy_(flat[at : at + g.numel()])
            at += g.numel()


def saved_bytes(fn, *args, exclude: Params = ()) -> tuple[object, int]:
    """``fn(*args)``, and the bytes autograd saved for the backward pass while it
    ran, each storage counted once, those of ``exclude`` (the parameters) left
    out: the activation memory of a forward pass."""
    skip = {v.untyped_storage().data_ptr() for p in exclude for v in p.values()}
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor):
        st = t.untyped_storage()
        if st.data_ptr() not in skip:
            seen[st.data_ptr()] = max(seen.get(st.data_ptr(), 0), st.nbytes())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn(*args)
    return out, sum(seen.values())
