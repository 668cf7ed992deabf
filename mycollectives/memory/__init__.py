"""Tools of chapter 1, the memory hierarchy: each runs on CPU and on CUDA.

- :mod:`~mycollectives.memory.bandwidth`: read bandwidth against working-set
  size, which shows the cache cliffs of the machine at hand.
- :mod:`~mycollectives.memory.roofline`: measured peak compute and bandwidth,
  and Transformer operations placed on the roofline by measurement.
- :mod:`~mycollectives.memory.vendor`: A100 and H100 figures from NVIDIA's
  documents, for the same plots.
- :mod:`~mycollectives.memory.ledger`: the memory of one training step,
  predicted from the model's shape and measured (CUDA allocator, or
  :class:`~mycollectives.memory.tracker.LiveTensors` on CPU).
"""

from __future__ import annotations

from .bandwidth import BandwidthPoint, bandwidth_sweep, cache_sizes, default_sizes
from .ledger import (
    STAGES,
    EncoderConfig,
    activation_bytes,
    activation_elements,
    bytes_per_parameter,
    measure,
    parameter_count,
    predict,
)
from .roofline import Kernel, KernelPoint, Roofline, measure_kernel, measure_roofline, transformer_kernels
from .tracker import LiveTensors
from .vendor import A100, GPUS, H100, GPUSpec, h100_levels

__all__ = [
    "h100_levels",
    "A100",
    "GPUS",
    "H100",
    "STAGES",
    "BandwidthPoint",
    "EncoderConfig",
    "GPUSpec",
    "Kernel",
    "KernelPoint",
    "LiveTensors",
    "Roofline",
    "activation_bytes",
    "activation_elements",
    "bandwidth_sweep",
    "bytes_per_parameter",
    "cache_sizes",
    "default_sizes",
    "measure",
    "measure_kernel",
    "measure_roofline",
    "parameter_count",
    "predict",
    "transformer_kernels",
]
