"""What a virtual GPU does not emulate: torch's calls that raise ``NotEmulated`` in a rank thread.

A rank's tensors live on the CPU (:mod:`.cudapatch`), so what needs a GPU's
own machinery is refused, naming it, rather than run wrongly: code
generation (``torch.compile``), CUDA graphs, NVML's readings (utilization,
temperature, power, clocks, memory use) and custom CUDA kernels
(``torch.utils.cpp_extension``). Outside a rank thread each call is torch's own.
"""

from __future__ import annotations

import torch

from .cuda import refuse


def rows() -> list[tuple[object, str, object]]:
    """(owner, attribute, stand-in) of every refusal, for :func:`.cudapatch._table`."""
    c, acc = torch.cuda, torch.accelerator
    graphs, nvml, kernels = "CUDA graphs", "NVML, the GPU's management library", "custom CUDA kernels"
    out = [
        (torch, "compile", refuse("torch.compile", "GPU code generation")),
        (c, "CUDAGraph", refuse("torch.cuda.CUDAGraph", graphs)),
        (c, "graph", refuse("torch.cuda.graph", graphs)),
        (c, "make_graphed_callables", refuse("torch.cuda.make_graphed_callables", graphs)),
        (acc, "Graph", refuse("torch.accelerator.Graph", graphs)),
    ]
    out += [(c, f, refuse(f"torch.cuda.{f}", nvml)) for f in ("utilization", "temperature", "power_draw")]
    out += [(c, f, refuse(f"torch.cuda.{f}", nvml)) for f in ("clock_rate", "memory_usage")]
    try:
        import torch.utils.cpp_extension as ext

        out += [(ext, f, refuse(f"torch.utils.cpp_extension.{f}", kernels)) for f in ("load", "load_inline")]
    except ImportError:  # pragma: no cover - a torch without it has nothing to refuse
        pass
    return out
