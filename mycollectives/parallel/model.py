"""The small Transformer every strategy of chapter 5 splits, and its unsharded reference.

Activations are laid out ``[sequence, batch, hidden]`` (Megatron-LM's
``s, b, h``), so that a sequence shard is a contiguous block of rows, the
block a collective on dim 0 gathers or scatters. A layer is pre-norm:
``h = x + attention(norm(x))``, ``y = h + mlp(norm(h))``, causal multi-head
attention, a GELU MLP, RMSNorm. Parameters are plain tensors in one dict per
layer, so a strategy shards them by slicing:

=========  ==========================  ==================================
name       shape                       tensor parallelism (Megatron)
=========  ==========================  ==================================
``norm1``  ``[d]``                     replicated
``wq``     ``[d, d]`` (also wk, wv)    columns: heads split over ranks
``wo``     ``[d, d]``                  rows: the same heads
``norm2``  ``[d]``                     replicated
``w1``     ``[d, f]``                  columns
``w2``     ``[f, d]``                  rows
=========  ==========================  ==================================

The loss divides by the *global* number of elements, so the losses of
shards add up to the loss of the whole batch and their gradients add up to
its gradient: every strategy sums gradients with ``ReduceOp.SUM``.

>>> cfg = BlockConfig()
>>> x, target = batch(cfg)
>>> y = forward(init_params(cfg), x, cfg)
>>> tuple(y.shape) == (cfg.seq, cfg.batch, cfg.d)
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

Params = list[dict[str, torch.Tensor]]


@dataclass(frozen=True)
class BlockConfig:
    """Sizes of the small model: hidden ``d``, ``heads``, MLP width ``ffn``, ``layers``,
    and a batch of ``batch`` sequences of ``seq`` tokens, in ``dtype``."""

    d: int = 16
    heads: int = 4
    ffn: int = 32
    layers: int = 2
    seq: int = 8
    batch: int = 2
    dtype: torch.dtype = torch.float64

    @property
    def head_dim(self) -> int:
        return self.d // self.heads


def init_params(cfg: BlockConfig, seed: int = 0) -> Params:
    """The same parameters on every rank (a seeded generator), one dict per layer."""
    g = torch.Generator().manual_seed(seed)

    def w(*shape: int, fan_in: int) -> torch.Tensor:
        return (torch.randn(*shape, generator=g, dtype=torch.float64) / math.sqrt(fan_in)).to(cfg.dtype)

    def gain() -> torch.Tensor:
        return (1 + 0.1 * torch.randn(cfg.d, generator=g, dtype=torch.float64)).to(cfg.dtype)

    d, f = cfg.d, cfg.ffn
    return [
        {
            "norm1": gain(),
            "wq": w(d, d, fan_in=d),
            "wk": w(d, d, fan_in=d),
            "wv": w(d, d, fan_in=d),
            "wo": w(d, d, fan_in=d),
            "norm2": gain(),
            "w1": w(d, f, fan_in=d),
            "w2": w(f, d, fan_in=f),
        }
        for _ in range(cfg.layers)
    ]


def batch(cfg: BlockConfig, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and regression targets, ``[seq, batch, d]`` each."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(cfg.seq, cfg.batch, cfg.d, generator=g, dtype=torch.float64)
    t = torch.randn(cfg.seq, cfg.batch, cfg.d, generator=g, dtype=torch.float64)
    return x.to(cfg.dtype), t.to(cfg.dtype)


def rms_norm(x: torch.Tensor, gain: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * gain


def heads(x: torch.Tensor, n: int) -> torch.Tensor:
    """``[s, b, n * dh]`` -> ``[b, n, s, dh]``."""
    s, b, _ = x.shape
    return x.view(s, b, n, -1).permute(1, 2, 0, 3)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """``[b, n, s, dh]`` -> ``[s, b, n * dh]``."""
    b, n, s, dh = x.shape
    return x.permute(2, 0, 1, 3).reshape(s, b, n * dh)


def causal_mask(q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
    """True where a query may not see a key (the key comes later)."""
    return k_pos[None, :] > q_pos[:, None]


def attention_core(q, k, v, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
    """Causal softmax attention of ``q`` ``[b, n, sq, dh]`` over ``k, v`` ``[b, n, sk, dh]``
    at absolute positions ``q_pos``, ``k_pos`` (so a shard of the sequence masks right)."""
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(causal_mask(q_pos, k_pos), float("-inf"))
    return scores.softmax(-1) @ v


def attention(p: dict, x: torch.Tensor, n_heads: int, pos: torch.Tensor | None = None) -> torch.Tensor:
    """Multi-head causal self-attention on ``x`` ``[s, b, d]`` (``n_heads`` of the heads in ``p``)."""
    pos = torch.arange(x.shape[0]) if pos is None else pos
    q, k, v = (heads(x @ p[w], n_heads) for w in ("wq", "wk", "wv"))
    return merge_heads(attention_core(q, k, v, pos, pos)) @ p["wo"]


def mlp(p: dict, x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.gelu(x @ p["w1"]) @ p["w2"]


def block(p: dict, x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """One pre-norm layer: ``h = x + attn(norm(x))``, ``h + mlp(norm(h))``."""
    h = x + attention(p, rms_norm(x, p["norm1"]), n_heads)
    return h + mlp(p, rms_norm(h, p["norm2"]))


def forward(params: Params, x: torch.Tensor, cfg: BlockConfig) -> torch.Tensor:
    for p in params:
        x = block(p, x, cfg.heads)
    return x


def loss_fn(y: torch.Tensor, target: torch.Tensor, total: int) -> torch.Tensor:
    """Squared error summed over this shard, divided by the ``total`` elements of the whole batch."""
    return ((y - target) ** 2).sum() / total


def reference(cfg: BlockConfig, seed: int = 0) -> tuple[torch.Tensor, Params, torch.Tensor]:
    """One process, everything: the output, every parameter's gradient, and the input's gradient."""
    params = [{k: v.clone().requires_grad_() for k, v in p.items()} for p in init_params(cfg, seed)]
    x, target = batch(cfg)
    x.requires_grad_()
    y = forward(params, x, cfg)
    loss_fn(y, target, target.numel()).backward()
    grads = [{k: v.grad for k, v in p.items()} for p in params]
    return y.detach(), grads, x.grad


def leaves(params: Params) -> Params:
    """A copy of ``params`` whose tensors are leaves that record their gradient."""
    return [{k: v.detach().clone().requires_grad_() for k, v in p.items()} for p in params]


def grads_of(params: Params) -> Params:
    return [
        {k: (v.grad if v.grad is not None else torch.zeros_like(v)) for k, v in p.items()} for p in params
    ]
