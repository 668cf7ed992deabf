"""Compute on a virtual GPU: every torch op a rank runs is charged at the GPU's achieved rates.

A rank's thread runs under a :class:`Charge`, a ``TorchDispatchMode`` (dispatch
modes are per thread): for every aten op it counts FLOPs as
``torch.utils.flop_counter`` counts them (its ``flop_registry``: ``2 m n k``
for a matrix product, convolutions, attention) and bytes as the op's inputs
plus its outputs (the minimum traffic, as chapter 1's roofline counts it),
and advances the rank's clock by ``max(flops / (peak x gemm), bytes / (hbm x fraction), floor)``:
chapter 1's roofline (``williams2009roofline``; :class:`~mycollectives.memory.roofline.Roofline`)
at the rates measured GPUs reach, a GEMM's by its shape (:mod:`.rates`), or at the
roofline itself with ``virtual.run(..., compute="roofline")``.
The op itself runs on the CPU, so results are real. Views, ``empty`` and
reading a scalar move nothing and cost nothing, nor does making a tensor's
first values (``ones``, ``zeros``, ``rand``, ``arange``: the data's set-up);
filling an existing one (``fill_``, ``zero_``) is charged, nor do the
profiler's markers (``record_function``: host bookkeeping). The package's own
collectives move their bytes in network time; their reductions run on the GPU
and are charged here as memory-bound kernels (:func:`collective`), as NCCL's
kernels reduce as they go.

An op is charged at the peak of its dtype: bfloat16 and float16 at the GPU's
dense tensor-core peak; float32 (and wider) at its FP32 rate, except a float32
matrix product while ``torch.get_float32_matmul_precision()`` is ``"high"`` or
``"medium"`` (``allow_tf32``), which runs on TF32 tensor cores at half the
bf16 peak. A float32 model on the virtual cluster is therefore priced as
float32 on the GPU; cast it to bfloat16 to price a mixed-precision model.
"""

from __future__ import annotations

import contextlib

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import flop_registry

from ..memory.roofline import Roofline
from ..memory.vendor import A100, GB, H100, TFLOPS
from .dispatch import here as _here
from .dispatch import kind, paused
from .rates import ROOFLINE, Rates, gemm_shape, quantisation, tf32

# Dense bf16 tensor-core peak and HBM bandwidth per GPU. A100 and H100: chapter 1's vendor table
# (memory/vendor.py). The others halve the datasheets' "with sparsity" figures: H200 (nvidia2024h200) has
# the H100's compute and 4.8 TB/s of HBM3e; a DGX B200 (nvidia_dgx_b200_guide) gives 72 PFLOP/s FP8 with
# sparsity and 64 TB/s of HBM for 8 GPUs, so 2.25 PFLOP/s bf16 dense and 8 TB/s each; a GB200 NVL72
# (nvidia_gb200_nvl72) 360 PFLOP/s bf16 with sparsity and 576 TB/s for 72 GPUs, so 2.5 and 8 TB/s each.
GPU_ROOFLINES = {
    "A100 SXM4": Roofline(A100.peak_flops["bf16"], A100.hbm_bandwidth, "A100 SXM4 (bf16 dense)"),
    "H100 SXM5": Roofline(H100.peak_flops["bf16"], H100.hbm_bandwidth, "H100 SXM5 (bf16 dense)"),
    "H200 SXM5": Roofline(H100.peak_flops["bf16"], 4800 * GB, "H200 SXM5 (bf16 dense)"),
    "B200": Roofline(2250 * TFLOPS, 8000 * GB, "B200 (bf16 dense)"),
    "GB200": Roofline(2500 * TFLOPS, 8000 * GB, "GB200 (bf16 dense)"),
}

# FP32 (non-tensor) peak per GPU: A100 and H100 from chapter 1's vendor table; H200 has the H100's compute;
# B200 and GB200 from the per-GPU table of verda2025blackwell (75 TFLOP/s each).
FP32_PEAK = {
    "A100 SXM4": A100.peak_flops["fp32"],
    "H100 SXM5": H100.peak_flops["fp32"],
    "H200 SXM5": H100.peak_flops["fp32"],
    "B200": 75 * TFLOPS,
    "GB200": 75 * TFLOPS,
}
_TENSOR_CORE_DTYPES = (torch.bfloat16, torch.float16)


def _gpu_of(topology) -> str:
    node = getattr(topology, "node", None)
    gpu = node.gpu if node is not None else "H100 SXM5"
    return gpu if gpu in GPU_ROOFLINES else "H100 SXM5"


def roofline_of(topology, dtype: torch.dtype = torch.bfloat16) -> Roofline:
    """The roofline of the cluster's GPU (from the node it was built from; H100 if it says
    none) for ``dtype``: the tensor-core peak for 16-bit types, the FP32 rate otherwise."""
    if not isinstance(dtype, torch.dtype):
        raise TypeError(
            f"roofline_of: argument 'dtype' must be a torch.dtype, e.g. torch.bfloat16, got {dtype!r}"
        )
    gpu = _gpu_of(topology)
    roof = GPU_ROOFLINES[gpu]
    if dtype in _TENSOR_CORE_DTYPES:
        return roof
    return Roofline(FP32_PEAK[gpu], roof.bandwidth, f"{gpu} (fp32)")


def op_time(roof: Roofline, flops: float, nbytes: float, rates: Rates = ROOFLINE, shape=None) -> float:
    """Seconds of one kernel on ``roof`` at ``rates`` (see the module); ``shape``: a GEMM's
    ``(batch, m, n, k)``, which pays for whole tiles and waves when ``rates`` says how many SMs."""
    compute = flops / (roof.peak_flops * rates.gemm)
    if shape is not None and rates.sms:
        compute *= quantisation(shape, rates.sms)
    return max(compute, nbytes / (roof.bandwidth * rates.hbm), rates.floor)


def _dtype(tree) -> torch.dtype | None:
    """The dtype of the first floating-point tensor in ``tree`` (an op's output, else its inputs)."""
    stack = [tree]
    while stack:
        x = stack.pop(0)
        if isinstance(x, torch.Tensor) and x.is_floating_point():
            return x.dtype
        if isinstance(x, (list, tuple)):
            stack.extend(x)
    return None


def _bytes(tree) -> int:
    if isinstance(tree, torch.Tensor):  # most often an op's output
        return tree.numel() * tree.element_size()
    total = 0
    stack = [tree]
    while stack:
        x = stack.pop()
        if isinstance(x, torch.Tensor):
            total += x.numel() * x.element_size()
        elif isinstance(x, (list, tuple)):
            stack.extend(x)
        elif isinstance(x, dict):
            stack.extend(x.values())
    return total


class Charge(TorchDispatchMode):
    """Charges every op this thread runs to ``actor``'s clock (see the module)."""

    def __init__(self, actor, roof: Roofline, slow: float = 1.0, record=None, fp32: Roofline | None = None,
                 rates: Rates = ROOFLINE):  # fmt: skip
        super().__init__()
        self.actor, self.roof, self.slow, self.record, self.rates = actor, roof, slow, record, rates
        self.fp32 = fp32 or roof
        self.tf32 = Roofline(roof.peak_flops / 2, roof.bandwidth, f"{roof.label} (tf32)")
        self.flops = 0.0
        self.bytes = 0.0
        self.ops = 0

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        """No: torch then wraps every op's dispatch here in a guard against torch.compile, which a virtual
        run refuses anyway; the guard costs each op, and its first call imports torch._dynamo (seconds)."""
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        k = kind(func)
        if k.uncharged or getattr(_here, "paused", 0):
            return out
        packet = func._overloadpacket
        fn = flop_registry.get(packet)
        flops = fn(*args, **kwargs, out_val=out) if fn is not None else 0
        nbytes = _bytes(args) + _bytes(kwargs) + _bytes(out)
        self.flops += flops
        self.bytes += nbytes
        self.ops += 1
        shape = gemm_shape(k.name, args)
        self.charge(op_time(self.roofline(_dtype((out, args)), shape), flops, nbytes, self.rates, shape))
        return out

    def roofline(self, dtype: torch.dtype | None, shape=None) -> Roofline:
        """The roofline an op of ``dtype`` runs on: tensor cores for 16-bit types, and for a float32
        GEMM while torch allows TF32; the FP32 rate otherwise."""
        if dtype in _TENSOR_CORE_DTYPES:
            return self.roof
        return self.tf32 if shape is not None and tf32() else self.fp32

    def seconds(self, flops: float = 0.0, nbytes: float = 0.0) -> float:
        """What ``flops`` on the tensor cores and ``nbytes`` of HBM traffic take on this GPU, at its rates."""
        return op_time(self.roof, flops, nbytes, self.rates)

    def charge(self, seconds: float) -> None:
        """Advance the rank's clock by ``seconds`` of its GPU's time (times its slowness)."""
        start = self.actor.clock
        self.actor.clock = start + seconds * self.slow
        if self.record is not None:
            self.record(self.actor.rank, "compute", start, self.actor.clock)


class _Reductions(TorchDispatchMode):
    """Inside a collective: every op that is not a copy (the network's work) is a reduction, charged
    to ``actor``'s clock as memory-bound work at ``charge``'s HBM rate (inside the collective's own
    kernel, so without a kernel floor of its own)."""

    def __init__(self, charge: Charge, actor):
        super().__init__()
        self.c, self.actor = charge, actor

    _should_skip_dynamo = Charge._should_skip_dynamo

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        k = kind(func)
        out = None
        if (k.may_skip or "out" in kwargs) and _first_is_meta(args):
            out = _without_data(k.name, args, kwargs)
        if out is None:
            out = func(*args, **kwargs)
        if k.no_reduction:
            return out
        if self.actor.state.get("free"):  # the argument check's combine (virtual/transport.py): bookkeeping
            return out
        nbytes = _bytes(args) + (_bytes(kwargs) if kwargs else 0) + _bytes(out)
        # no floor: the reductions run inside the collective's kernel, as NCCL's do, not as kernels of their own
        self.actor.clock += nbytes / (self.c.roof.bandwidth * self.c.rates.hbm) * self.c.slow
        return out


def _first_is_meta(args) -> bool:
    """Whether the op's first tensor (the first of a ``cat``'s list) is meta: :func:`_without_data` gives
    None unless all are, so an op on real data need not ask it."""
    first = args[0] if args else None
    if isinstance(first, (list, tuple)):
        first = first[0] if first else None
    return not isinstance(first, torch.Tensor) or first.is_meta


def _without_data(name: str, args, kwargs) -> torch.Tensor | None:
    """What a collective's op on meta tensors (a data-free run) gives, without running torch's meta
    kernels (Python, slow): an op into a tensor (``add_``, ``copy_``, ``out=``) gives that tensor, a flat
    ``cat`` a new one of the total length; None where it must run."""
    tensors = [a for a in args if isinstance(a, torch.Tensor)] + [
        v for v in kwargs.values() if isinstance(v, torch.Tensor)
    ]
    if name == "aten::cat" and args and isinstance(args[0], (list, tuple)) and len(args) == 1 and not kwargs:
        parts = args[0]
        if parts and all(t.is_meta and t.dim() == 1 and t.dtype == parts[0].dtype for t in parts):
            return torch.empty(sum(t.numel() for t in parts), dtype=parts[0].dtype, device="meta")
        return None
    if not tensors or not all(t.is_meta for t in tensors):
        return None
    if "out" in kwargs:
        return kwargs["out"]
    return args[0] if name.endswith("_") and isinstance(args[0], torch.Tensor) else None


@contextlib.contextmanager
def collective(charge: Charge | None, actor):
    """A collective's work on ``actor`` (a rank, or its communication stream): not charged as
    compute (:func:`paused`), except its reductions, charged as memory-bound kernels."""
    with paused():
        if charge is None or not charge.rates.reductions:
            yield
        else:
            with _Reductions(charge, actor):
                yield
