"""Where a tensor says it is: on the rank's virtual GPU, as the script's own code expects.

Underneath, a rank's tensors live on the CPU (:mod:`.cudapatch`). A script
written for a GPU checks ``x.is_cuda``, prints ``x.device`` or compares it
with ``torch.device("cuda", local_rank)``; so, in a rank thread, to the
*script's* code (any file outside torch, this package, the standard library
and installed packages: the script and the modules beside it):

* a CPU tensor reads as on the rank's GPU: ``x.device`` is ``cuda:N``,
  ``x.is_cuda`` True, ``x.is_cpu`` False, ``x.get_device()`` N, where N is
  the last CUDA device the script named (``.cuda(i)``, ``.to(i | "cuda:i")``,
  ``device=``, ``Module.to``, DDP's ``device_ids``), else its current device;
* ``.cpu()`` and ``.to("cpu")`` of such a tensor return a copy (as the copy
  to the host on a GPU does; it is not counted in the GPU's memory, and
  costs no virtual time) that reads ``cpu``, as does a tensor a factory
  made with ``device="cpu"``; ``.cuda()`` / ``.to("cuda")`` of that returns a
  copy that reads as on the GPU again.

What differs from a GPU node (said in the launcher's docstring and on the
virtual-cluster page too):

* a tensor the script made without naming a device (``torch.randn(3)``)
  reads as on the GPU, where on a GPU node it is on the CPU; so does one
  computed from a tensor that reads ``cpu`` unless that tensor is the op's
  first argument (``c + 1`` and ``c.float()`` read ``cpu``,
  ``torch.cat([c, c])`` and gradients do not); ``Module.to("cpu")`` leaves
  its parameters reading as on the GPU; meta tensors stay ``meta``;
* a process that uses two GPUs sees every tensor on the last one it named;
* torch itself, installed libraries and the standard library see the truth
  (``cpu``), so each takes its CPU path: ``print(x)`` shows no
  ``device='cuda:N'``, ``torch.save`` stores CPU storages, and ``x.numpy()``
  works where CUDA would refuse it.
"""

from __future__ import annotations

import os
import sys
import sysconfig

import torch
from torch.utils._python_dispatch import _disable_current_modes
from torch.utils.weak import WeakIdKeyDictionary

from ..memory.vendor import A100, GB, H100
from . import cuda as _c

_REAL_DEVICE = torch._C.TensorBase.device.__get__
_CPU = torch.device("cpu")
_paths = sysconfig.get_paths()
_TRUTH = tuple(
    {os.path.dirname(os.path.dirname(os.path.abspath(__file__))), os.path.dirname(torch.__file__)}
    | {_paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
) + ("<frozen", "<eval_with_key")
_host_copies = WeakIdKeyDictionary()  # tensors that read ``cpu`` to the script (see the module)


def scripts(frame) -> bool:
    """Whether ``frame`` runs the script's own code (not torch's, this package's or a library's)."""
    return not frame.f_code.co_filename.startswith(_TRUTH)


def _on_gpu(t: torch.Tensor, frame) -> int | None:
    """The GPU index ``t`` reads as on to the code of ``frame``, or None when it reads the truth."""
    g = _c.gpu()
    if g is None or not scripts(frame) or t in _host_copies or _REAL_DEVICE(t).type != "cpu":
        return None
    return g.device if g.home is None else g.home


def _device(self) -> torch.device:
    i = _on_gpu(self, sys._getframe(1))
    return _REAL_DEVICE(self) if i is None else torch.device("cuda", i)


def _is_cuda(self) -> bool:
    i = _on_gpu(self, sys._getframe(1))
    return torch._C.TensorBase.is_cuda.__get__(self) if i is None else True


def _is_cpu(self) -> bool:
    i = _on_gpu(self, sys._getframe(1))
    return torch._C.TensorBase.is_cpu.__get__(self) if i is None else False


def _get_device(self) -> int:
    i = _on_gpu(self, sys._getframe(1))
    return torch._C.TensorBase.get_device(self) if i is None else i


def rows() -> list[tuple[object, str, object]]:
    """The patches of ``torch.Tensor`` (see the module), for :func:`.cudapatch._table`."""
    t = torch.Tensor
    return [
        (t, "device", property(_device)),
        (t, "is_cuda", property(_is_cuda)),
        (t, "is_cpu", property(_is_cpu)),
        (t, "get_device", _get_device),
    ]


def placed(index: int) -> None:
    """The script named CUDA device ``index``: tensors read as on it from now on."""
    _c.gpu().home = index


def to_host(func, args, kwargs, frame):
    """``.cpu()`` / ``.to("cpu")`` from the script: a copy that reads ``cpu`` (the tensor itself when it
    does already)."""
    out = func(*args, **kwargs)
    if scripts(frame) and isinstance(out, torch.Tensor) and out.device == _CPU:
        if out is args[0] and args[0] not in _host_copies:
            with _disable_current_modes():  # a copy in host memory: not the GPU's memory, nor its work
                out = out.clone()
        _host_copies[out] = True
    return out


def to_gpu(t: torch.Tensor) -> torch.Tensor:
    """``.cuda()`` / ``.to("cuda")`` of ``t``: ``t``, or a copy when ``t`` reads ``cpu``."""
    return t.clone() if t in _host_copies else t


def made_on_host(out):
    """A factory's result with ``device="cpu"`` named by the script: it reads ``cpu``."""
    if isinstance(out, torch.Tensor):
        _host_copies[out] = True
    return out


def follows(args, out):
    """``out``, reading ``cpu`` when the op's first argument does (``c + 1``, ``c.float()``, ``c.sum()``)."""
    if _host_copies and args and isinstance(args[0], torch.Tensor) and args[0] in _host_copies:
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor):
                _host_copies[t] = True
    return out


# What torch.cuda reports of each GPU: (compute capability, memory in bytes, SMs). Capabilities are the
# architectures' (8.0 Ampere, 9.0 Hopper, 10.0 Blackwell); A100 and H100 memory and SMs are chapter 1's
# vendor table (memory/vendor.py); H200: 141 GB (nvidia2024h200) and the H100's SMs; B200: the DGX B200's
# 1,440 GB over 8 GPUs (nvidia_dgx_b200_guide); GB200: the NVL72's 13.4 TB over 72 (nvidia_gb200_nvl72).
# Blackwell's 148 SMs are not in those documents: assumed, so that a script reading the count gets a number.
SPECS = {
    "A100": ((8, 0), A100.hbm_bytes, A100.sms),
    "H100": ((9, 0), H100.hbm_bytes, H100.sms),
    "H200": ((9, 0), 141 * GB, H100.sms),
    "B200": ((10, 0), 1440 * GB // 8, 148),
    "GB200": ((10, 0), 13400 * GB // 72, 148),
}


def spec(name: str) -> tuple[tuple[int, int], int, int]:
    """The :data:`SPECS` row of the GPU called ``name`` ("H100 SXM5 (virtual)"); the H100's if unknown."""
    return SPECS.get(name.split()[0], SPECS["H100"]) if name else SPECS["H100"]
