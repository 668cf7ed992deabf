"""Live tensor memory on any device: a dispatch mode that watches storages.

Introduced in chapter 1 (the memory hierarchy). On CUDA the caching allocator
counts bytes for us (``torch.cuda.memory_allocated``); on CPU nothing does, so
:class:`LiveTensors` sees every tensor an operator returns, records the
storage behind it once, and forgets it when torch frees that storage (torch
keeps one Python object per live storage, so a ``weakref.finalize`` on it
fires exactly when the memory is released, including tensors that only
autograd still holds).
"""

from __future__ import annotations

import weakref
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves


class LiveTensors(TorchDispatchMode):
    """Bytes of tensor storage alive now (``.live``) and at most (``.peak``).

    Only storages created while the mode is active are counted::

        with LiveTensors() as mem:
            x = torch.ones(1024)          # mem.live == 4096
            del x                         # mem.live == 0, mem.peak == 4096
    """

    def __init__(self) -> None:
        super().__init__()
        self._sizes: dict[int, int] = {}
        self.live = 0
        self.peak = 0

    def reset_peak(self) -> None:
        """Start a new peak from the current live bytes."""
        self.peak = self.live

    def _forget(self, key: int) -> None:
        self.live -= self._sizes.pop(key, 0)

    def _track(self, tensor: torch.Tensor) -> None:
        storage = tensor.untyped_storage()
        key = storage._cdata
        if key in self._sizes:  # a view of a storage we already count
            return
        self._sizes[key] = storage.nbytes()
        self.live += storage.nbytes()
        self.peak = max(self.peak, self.live)
        weakref.finalize(storage, self._forget, key)

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        for leaf in tree_leaves(out):
            if isinstance(leaf, torch.Tensor) and leaf.device.type != "meta":
                self._track(leaf)
        return out
