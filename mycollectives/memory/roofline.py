"""The roofline: peak compute, peak bandwidth, and where operations fall.

Introduced in chapter 1 (the memory hierarchy), after ``williams2009roofline``.
An operation that does ``F`` FLOPs while moving ``B`` bytes to and from main
memory has arithmetic intensity ``I = F / B``; it cannot run faster than
``min(peak_flops, I * bandwidth)``. FLOPs and bytes here are *counted* from
the operation's shapes (the minimum traffic: read each input once, write each
output once), while times are *measured*.

FLOP conventions: a multiply-add is 2 FLOPs (GEMM: ``2 m n k``); softmax 5
per element (max, subtract, exp, sum, divide); layer norm 8 per element
(mean, subtract, square, sum, scale, shift and the two affine operations);
elementwise add 1.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from .timing import best_time
from .vendor import GPUSpec


@dataclass(frozen=True)
class Roofline:
    """Peak compute (FLOP/s) and memory bandwidth (bytes/s) of one device."""

    peak_flops: float
    bandwidth: float
    label: str = ""

    @property
    def ridge_point(self) -> float:
        """Arithmetic intensity (FLOPs/byte) where the two roofs meet."""
        return self.peak_flops / self.bandwidth

    def attainable(self, intensity: float) -> float:
        """The roof: best FLOP/s an operation of this intensity can reach."""
        return min(self.peak_flops, intensity * self.bandwidth)

    @classmethod
    def from_spec(cls, spec: GPUSpec, dtype: str = "bf16") -> Roofline:
        """The vendor's roofline: dense tensor-core peak and HBM bandwidth."""
        return cls(spec.peak_flops[dtype], spec.hbm_bandwidth, f"{spec.name} ({dtype}, vendor)")


@dataclass(frozen=True)
class Kernel:
    """One operation with counted FLOPs and bytes, and a way to run it."""

    name: str
    flops: float
    bytes: float
    run: Callable[[], object]

    @property
    def intensity(self) -> float:
        """FLOPs per byte moved."""
        return self.flops / self.bytes


@dataclass(frozen=True)
class KernelPoint:
    """A kernel placed on the roofline by measurement."""

    name: str
    intensity: float
    seconds: float
    flops: float

    @property
    def flops_per_s(self) -> float:
        """Achieved FLOP/s."""
        return self.flops / self.seconds


def gemm(
    m: int, n: int, k: int, device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32
) -> Kernel:
    """``(m, k) @ (k, n)``: a Linear layer on ``m`` tokens is ``m x d_in x d_out``."""
    a = torch.randn(m, k, device=device, dtype=dtype)
    b = torch.randn(k, n, device=device, dtype=dtype)
    size = a.element_size()
    return Kernel(f"GEMM {m}x{n}x{k}", 2.0 * m * n * k, float((m * k + k * n + m * n) * size), lambda: a @ b)


def softmax(
    rows: int, cols: int, device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32
) -> Kernel:
    """Softmax over the last axis of ``(rows, cols)`` (attention scores)."""
    x = torch.randn(rows, cols, device=device, dtype=dtype)
    return Kernel(
        f"softmax {rows}x{cols}", 5.0 * x.numel(), 2.0 * x.numel() * x.element_size(), lambda: x.softmax(-1)
    )


def layer_norm(
    rows: int, d: int, device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32
) -> Kernel:
    """Layer norm of ``rows`` tokens of width ``d``."""
    x = torch.randn(rows, d, device=device, dtype=dtype)
    w = torch.ones(d, device=device, dtype=dtype)
    b = torch.zeros(d, device=device, dtype=dtype)
    nbytes = (2.0 * x.numel() + 2 * d) * x.element_size()
    run = lambda: torch.nn.functional.layer_norm(x, (d,), w, b)  # noqa: E731
    return Kernel(f"layer norm {rows}x{d}", 8.0 * x.numel(), nbytes, run)


def elementwise_add(n: int, device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32) -> Kernel:
    """``x + y`` (a residual connection): 1 FLOP per 3 elements moved."""
    x = torch.randn(n, device=device, dtype=dtype)
    y = torch.randn(n, device=device, dtype=dtype)
    return Kernel(f"add {n}", float(n), 3.0 * n * x.element_size(), lambda: x + y)


def transformer_kernels(
    d_model: int = 2048,
    train_tokens: int = 512,
    working_set_bytes: int = 64 * 2**20,
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float32,
) -> list[Kernel]:
    """The operations of one Transformer layer of width ``d_model`` (``d_ff = 4 d_model``).

    Training GEMM: the feed-forward up-projection on ``train_tokens`` tokens.
    Inference GEMM: the same weights applied to one token (batch 1 decoding).
    Softmax, layer norm and add get about ``working_set_bytes`` of input
    each, which should exceed the last cache level: an operation whose data
    stays in cache between repeats is measured against the cache, not memory.
    """
    d_ff = 4 * d_model
    elems = working_set_bytes // torch.empty((), dtype=dtype).element_size()
    return [
        gemm(train_tokens, d_ff, d_model, device, dtype),
        gemm(1, d_ff, d_model, device, dtype),
        softmax(elems // 1024, 1024, device, dtype),
        layer_norm(elems // d_model, d_model, device, dtype),
        elementwise_add(elems, device, dtype),
    ]


def measure_kernel(kernel: Kernel, device: torch.device | str = "cpu", repeats: int = 5) -> KernelPoint:
    """Time ``kernel`` and place it on the roofline."""
    seconds = best_time(kernel.run, device, repeats=repeats, warmup=2)
    return KernelPoint(kernel.name, kernel.intensity, seconds, kernel.flops)


def measure_roofline(
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float32,
    gemm_size: int | None = None,
    copy_bytes: int | None = None,
) -> Roofline:
    """Measure this device's roofline: large square GEMMs and a large copy.

    Bandwidth is the better of a copy (``2 * copy_bytes`` moved: read and
    write, the STREAM convention) and a read-only sum, with a buffer far
    larger than any cache. Sizes default to what a CPU
    measures in a fraction of a second and what fills a GPU.
    """
    cuda = torch.device(device).type == "cuda"
    n = gemm_size or (8192 if cuda else 1024)
    # The best of several sizes and repeats: other work on a machine only ever slows a run down.
    sizes = (n // 2, n, n, 2 * n) if not cuda else (n // 2, n)
    peak = max(measure_kernel(gemm(m, m, m, device, dtype), device, repeats=7).flops_per_s for m in sizes)
    nbytes = copy_bytes or (2**30 if cuda else 2**27)
    src = torch.ones(nbytes // 4, device=device)
    dst = torch.empty_like(src)
    copy = 2 * nbytes / best_time(lambda: dst.copy_(src), device, repeats=10)
    read = nbytes / best_time(src.sum, device, repeats=10)
    name = f"{torch.device(device).type} ({str(dtype).split('.')[-1]}, measured)"
    return Roofline(peak, max(copy, read), name)
