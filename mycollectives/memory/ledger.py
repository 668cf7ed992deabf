"""A memory ledger of one training step: predict it, then measure it.

Introduced in chapter 1 (the memory hierarchy). The model is the book's
running example, ``torch.nn.TransformerEncoder`` (post-norm layers, ReLU,
dropout off as in most large-model pre-training, so attention runs as one
fused kernel on CPU and CUDA alike). :func:`predict` counts bytes from the
configuration alone; :func:`measure` runs the step and reads live bytes after
each stage. The chapter shows the two side by side.

Precisions:

- ``"fp32"``: parameters, gradients and both Adam moments in fp32, 4 bytes
  each: 16 bytes per parameter once the optimizer has stepped.
- ``"mixed"``: bf16 parameters and gradients (2 + 2 bytes), fp32 master
  weights and Adam moments (4 + 4 + 4): also 16 bytes per parameter
  (``rajbhandari2020zero``), but activations at 2 bytes.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from .tracker import LiveTensors

#: The stages of one training step, in order; the ledger has one entry for each.
STAGES = ("parameters", "input", "forward", "backward", "optimizer step", "zero_grad")


@dataclass(frozen=True)
class EncoderConfig:
    """Shape of the model and of one batch."""

    n_layers: int = 6
    d_model: int = 512
    n_heads: int = 8
    d_ff: int = 2048
    batch: int = 4
    seq: int = 128

    @property
    def tokens(self) -> int:
        """Tokens in one batch."""
        return self.batch * self.seq


def parameter_count(cfg: EncoderConfig) -> int:
    """Parameters of the encoder, counted from its layers' shapes.

    Per layer: the packed Q, K, V projection ``3 d^2 + 3 d``, the output
    projection ``d^2 + d``, the feed-forward pair ``2 d f + f + d``, and two
    layer norms ``4 d``.
    """
    d, f = cfg.d_model, cfg.d_ff
    per_layer = (3 * d * d + 3 * d) + (d * d + d) + (2 * d * f + f + d) + 4 * d
    return cfg.n_layers * per_layer


def activation_elements(cfg: EncoderConfig, checkpointing: bool = False) -> int:
    """Elements autograd keeps from the forward pass until the backward pass.

    Per layer and token (width ``d``, feed-forward ``f``, ``h`` heads): the
    layer input (saved by the Q, K, V projection, ``d``); Q, K and V
    (``3d``); the attention output (``d``) and its log-sum-exp (``h``); the
    two residual sums that enter the layer norms (``2d``) with their mean and
    inverse deviation (``4``); the first norm's output (``d``, saved by the
    feed-forward); the ReLU output (``f``): ``8d + f + h + 4``. The last
    layer's output (``d``) stands in for the first layer's input, which is
    the batch itself. With checkpointing only each layer's input is kept,
    and the rest is recomputed in the backward pass.
    """
    d, f, h = cfg.d_model, cfg.d_ff, cfg.n_heads
    per_token = d if checkpointing else 8 * d + f + h + 4
    return cfg.n_layers * cfg.tokens * per_token


def activation_bytes(cfg: EncoderConfig, itemsize: int = 4, checkpointing: bool = False) -> int:
    """Bytes of :func:`activation_elements`; the statistics (``h + 4``) stay fp32."""
    stats = 0 if checkpointing else cfg.n_layers * cfg.tokens * (cfg.n_heads + 4)
    return (activation_elements(cfg, checkpointing) - stats) * itemsize + stats * 4


def predict(cfg: EncoderConfig, precision: str = "fp32", checkpointing: bool = False) -> dict[str, int]:
    """Predicted live bytes after each stage of :data:`STAGES` (cumulative)."""
    if precision not in ("fp32", "mixed"):
        raise ValueError(f"precision must be 'fp32' or 'mixed', got {precision!r}")
    n = parameter_count(cfg)
    low = 4 if precision == "fp32" else 2  # bytes of a parameter, gradient, activation
    params = n * low + (4 * n if precision == "mixed" else 0)  # + fp32 master weights
    batch = cfg.tokens * cfg.d_model * low
    acts = activation_bytes(cfg, low, checkpointing)
    grads = n * low
    adam = 2 * 4 * n  # two fp32 moments per parameter
    return {
        "parameters": params,
        "input": params + batch,
        "forward": params + batch + acts,
        "backward": params + batch + grads,
        "optimizer step": params + batch + grads + adam,
        "zero_grad": params + batch + adam,
    }


def build_model(cfg: EncoderConfig, device: torch.device | str = "cpu") -> nn.TransformerEncoder:
    """The encoder of ``cfg`` on ``device`` in fp32, in training mode."""
    layer = nn.TransformerEncoderLayer(
        cfg.d_model, cfg.n_heads, cfg.d_ff, dropout=0.0, batch_first=True, device=device
    )
    return nn.TransformerEncoder(layer, cfg.n_layers, enable_nested_tensor=False).train()


def forward(model: nn.TransformerEncoder, x: torch.Tensor, checkpointing: bool = False) -> torch.Tensor:
    """Run the layers one by one, optionally each under activation checkpointing."""
    for layer in model.layers:
        x = checkpoint(layer, x, use_reentrant=False) if checkpointing else layer(x)
    return x


class _CudaMeter:
    """Live and peak bytes from the CUDA caching allocator, above a baseline."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        torch.cuda.synchronize(device)
        self.base = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)

    @property
    def live(self) -> int:
        torch.cuda.synchronize(self.device)
        return torch.cuda.memory_allocated(self.device) - self.base

    @property
    def peak(self) -> int:
        return torch.cuda.max_memory_allocated(self.device) - self.base


@contextlib.contextmanager
def meter(device: torch.device | str = "cpu") -> Iterator[LiveTensors | _CudaMeter]:
    """Something with ``.live`` and ``.peak`` bytes, for CPU or CUDA."""
    dev = torch.device(device)
    if dev.type == "cuda":
        _warm_up_cuda(dev)
        yield _CudaMeter(dev)
    else:
        with LiveTensors() as mem:
            yield mem


_WARMED: set[torch.device] = set()


def _warm_up_cuda(device: torch.device) -> None:
    """Run one tiny training step of every kind before the first baseline.

    cuBLAS and cuBLASLt (1 MiB by default, for products with a bias) make
    their workspaces from the caching allocator on first use and keep them,
    one per thread; the backward pass runs on autograd's own thread, where
    checkpointing also recomputes the forward. Warming up with the same
    operations on the same threads keeps those workspaces out of every
    measurement (on an H100 they made a tiny model's ledger look 130 % too big).
    """
    index = device.index if device.index is not None else torch.cuda.current_device()
    key = torch.device("cuda", index)
    if key in _WARMED:
        return
    _WARMED.add(key)
    tiny = EncoderConfig(n_layers=1, d_model=64, n_heads=4, d_ff=128, batch=2, seq=16)
    for precision in ("fp32", "mixed"):
        for checkpointing in (False, True):
            measure(tiny, key, precision, checkpointing)
    gc.collect()


def measure(
    cfg: EncoderConfig,
    device: torch.device | str = "cpu",
    precision: str = "fp32",
    checkpointing: bool = False,
    seed: int = 0,
) -> dict[str, int]:
    """Measured live bytes after each stage of one training step with Adam.

    Also returns ``"peak"``: the most bytes alive at any moment up to the end
    of the backward pass, which no stage snapshot shows.
    """
    torch.manual_seed(seed)
    out: dict[str, int] = {}
    with meter(device) as mem:
        model = build_model(cfg, device)
        gc.collect()
        master: list[torch.Tensor] = []
        if precision == "mixed":
            model = model.to(torch.bfloat16)
            master = [p.detach().float().requires_grad_() for p in model.parameters()]
        out["parameters"] = mem.live
        x = torch.randn(cfg.batch, cfg.seq, cfg.d_model, device=device, dtype=next(model.parameters()).dtype)
        out["input"] = mem.live
        y = forward(model, x, checkpointing)
        loss = y.pow(2).mean()
        out["forward"] = mem.live
        loss.backward()
        del y, loss
        out["backward"] = mem.live
        out["peak"] = mem.peak
        opt = torch.optim.Adam(master or list(model.parameters()), lr=1e-4)
        _step(model, master, opt)
        out["optimizer step"] = mem.live
        model.zero_grad(set_to_none=True)
        out["zero_grad"] = mem.live
        del model, master, opt, x
    return out


def _step(model: nn.Module, master: list[torch.Tensor], opt: torch.optim.Optimizer) -> None:
    """Adam step; with fp32 master weights, via fp32 copies of the bf16 gradients."""
    if not master:
        opt.step()
        return
    params = list(model.parameters())
    for p, m in zip(params, master):
        m.grad = p.grad.float()  # transient: freed again below
    opt.step()
    with torch.no_grad():
        for p, m in zip(params, master):
            p.copy_(m)  # round the updated master weights back to bf16
            m.grad = None


def bytes_per_parameter(ledger: dict[str, int], cfg: EncoderConfig, precision: str = "fp32") -> float:
    """Bytes per parameter of the training state after the optimizer step.

    The batch (``precision``'s element size per number) is not training
    state: it is subtracted.
    """
    batch = cfg.tokens * cfg.d_model * (4 if precision == "fp32" else 2)
    return (ledger["optimizer step"] - batch) / parameter_count(cfg)
