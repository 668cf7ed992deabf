"""Context parallelism (chapter 5): the sequence split over ranks, attention by a ring.

Everything in a Transformer layer but attention treats tokens one at a
time, so ``c`` ranks can each hold ``s / c`` consecutive tokens. Attention
needs every earlier key and value. Two ways to bring them:

- **ring attention** (Liu et al. 2023): the key/value block each rank holds
  travels around a ring of ``c`` ranks with send/recv. At each of the
  ``c - 1`` steps a rank posts the send of the block it holds and the receive
  of the next, computes attention of its queries on the block it holds
  while they are in flight, and folds the result in with the online softmax
  (a running maximum and log-sum-exp, as FlashAttention does). The backward
  pass runs the ring again, the key/value gradients travelling with their
  block until it is home.
- **all-gather** (Llama 3's choice, Dubey et al. 2024): all-gather K and V,
  attend, reduce-scatter their gradients backward. The same bytes, in one
  collective each way, and no overlap with the attention it feeds.

Causal attention makes rank ``r`` compute ``r + 1`` blocks and the last rank
``c``: the load is uneven (production code deals tokens out in a zigzag to
even it out; not done here).
"""

from __future__ import annotations

import math

import torch

from .. import api
from .comm import gather_rows
from .model import BlockConfig, Params, causal_mask, heads, merge_heads, mlp, rms_norm


def _block_attention(q, k, v, q_pos, k_pos):
    """Attention of ``q`` on one key/value block: output and log-sum-exp per query."""
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    s = s.masked_fill(causal_mask(q_pos, k_pos), float("-inf"))
    lse = torch.logsumexp(s, dim=-1)  # [b, n, sq]
    safe = torch.where(torch.isinf(lse), torch.zeros_like(lse), lse)
    return torch.exp(s - safe[..., None]) @ v, lse


def _merge(o, lse, o_j, lse_j):
    """Online softmax: combine two partial attentions by their log-sum-exps."""
    new = torch.logaddexp(lse, lse_j)
    safe = torch.where(torch.isinf(new), torch.zeros_like(new), new)
    return o * torch.exp(lse - safe)[..., None] + o_j * torch.exp(lse_j - safe)[..., None], new


def _shift(tensor: torch.Tensor, group):
    """Post the send of ``tensor`` to the next rank of the ring and the receive from the
    previous one; returns the receive buffer and a function that waits for both."""
    r, c = api.get_rank(group), api.get_world_size(group)
    buf = torch.empty_like(tensor)
    recv = api.irecv(buf, group=group, group_src=(r - 1) % c)
    send = api.isend(tensor, group=group, group_dst=(r + 1) % c)

    def wait():
        send.wait()
        recv.wait()
        return buf

    return buf, wait


class RingAttention(torch.autograd.Function):
    """Causal attention of this rank's queries on all ranks' keys and values, by a ring.

    ``q, k, v``: ``[b, n, s/c, dh]``, this rank's block ``r`` of the sequence.
    """

    @staticmethod
    def forward(ctx, q, k, v, group):
        r, c = api.get_rank(group), api.get_world_size(group)
        sl = q.shape[-2]
        q_pos = r * sl + torch.arange(sl)
        o = torch.zeros_like(q)
        lse = torch.full(q.shape[:-1], float("-inf"), dtype=q.dtype)
        kv = torch.stack([k, v]).contiguous()
        for step in range(c):
            src = (r - step) % c  # the rank whose block we hold
            if step < c - 1:
                _, wait = _shift(kv, group)  # in flight while we compute
            if src <= r:  # later blocks are all masked (causal)
                o_j, lse_j = _block_attention(q, kv[0], kv[1], q_pos, src * sl + torch.arange(sl))
                o, lse = _merge(o, lse, o_j, lse_j)
            if step < c - 1:
                kv = wait()
        ctx.group = group
        ctx.save_for_backward(q, k, v, o, lse)
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        group = ctx.group
        r, c = api.get_rank(group), api.get_world_size(group)
        sl, scale = q.shape[-2], 1 / math.sqrt(q.shape[-1])
        q_pos = r * sl + torch.arange(sl)
        delta = (do * o).sum(-1, keepdim=True)
        dq = torch.zeros_like(q)
        kv = torch.stack([k, v]).contiguous()
        dkv = torch.zeros_like(kv)
        for step in range(c):
            src = (r - step) % c
            if src <= r:
                kb, vb = kv[0], kv[1]
                s = (q @ kb.transpose(-1, -2)) * scale
                s = s.masked_fill(causal_mask(q_pos, src * sl + torch.arange(sl)), float("-inf"))
                prob = torch.exp(s - lse[..., None])
                dkv[1] += prob.transpose(-1, -2) @ do
                ds = prob * (do @ vb.transpose(-1, -2) - delta)
                dq += ds @ kb * scale
                dkv[0] += ds.transpose(-1, -2) @ q * scale
            if step < c - 1:  # the block and its gradient move on together
                both = torch.cat([kv, dkv]).contiguous()
                _, wait = _shift(both, group)
                kv, dkv = wait().split(2)
                kv, dkv = kv.contiguous(), dkv.contiguous()
            elif c > 1:  # the last hop: only the gradient goes home
                _, wait = _shift(dkv.contiguous(), group)
                dkv = wait()
        return dq, dkv[0], dkv[1], None


def ring_attention(q, k, v, group) -> torch.Tensor:
    return RingAttention.apply(q, k, v, group)


def cp_block(p: dict, x: torch.Tensor, cfg: BlockConfig, group, variant: str = "ring") -> torch.Tensor:
    """One layer on this rank's ``[s/c, b, d]`` block of the sequence."""
    a = rms_norm(x, p["norm1"])
    q, k, v = (a @ p[w] for w in ("wq", "wk", "wv"))
    if variant == "ring":
        o = merge_heads(ring_attention(heads(q, cfg.heads), heads(k, cfg.heads), heads(v, cfg.heads), group))
    elif variant == "all_gather":
        o = _gather_attention(q, k, v, cfg.heads, group)
    else:
        raise ValueError(f"variant must be 'ring' or 'all_gather', got {variant!r}")
    h = x + o @ p["wo"]
    return h + mlp(p, rms_norm(h, p["norm2"]))


def _gather_attention(q, k, v, n_heads: int, group) -> torch.Tensor:
    """The all-gather variant: ``k, v`` ``[s/c, b, d]`` gathered whole, ``q`` local."""
    r, c = api.get_rank(group), api.get_world_size(group)
    sl = q.shape[0]
    kf, vf = gather_rows(k, group), gather_rows(v, group)  # [s, b, d]; backward: reduce-scatter
    qh, kh, vh = heads(q, n_heads), heads(kf, n_heads), heads(vf, n_heads)
    s = qh @ kh.transpose(-1, -2) / math.sqrt(qh.shape[-1])
    s = s.masked_fill(causal_mask(r * sl + torch.arange(sl), torch.arange(c * sl)), float("-inf"))
    return merge_heads(s.softmax(-1) @ vh)


def cp_forward(params: Params, x: torch.Tensor, cfg: BlockConfig, group, variant: str = "ring"):
    for p in params:
        x = cp_block(p, x, cfg, group, variant)
    return x
