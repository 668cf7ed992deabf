"""Allocation and lifetime of this rank's heap (CPU): blocks, found by address, freed with their tensor.

Each allocation is an anonymous shared-memory file (``memfd_create``): it
has no name in ``/dev/shm`` at any time, so nothing is left there however a
process ends (killed, ``os._exit``, a crash in a rendezvous); the kernel
frees the memory when the last process mapping it lets go. A peer maps it
through ``/proc/<pid>/fd/<fd>`` (the owner keeps that descriptor open while
the block lives), as it opens the owner's wake-up pipe.

The caller's tensor owns its block: when its storage (and every view of it)
is freed, a finalizer closes the descriptor and drops the block from the
registry; the package's own mapping of the block (``mirror``) and the peers'
mappings live in the rendezvous handles, freed when no one holds them. So a
loop of ``empty``/``rendezvous``/``del`` holds no descriptor, mapping or
memory from one round to the next.
"""

from __future__ import annotations

import os
import weakref
from dataclasses import dataclass, field

import numpy as np
import torch

from .handle import PAD_BYTES, close_fds

ALIGN = 4096


@dataclass(eq=False)
class Block:
    """One allocation of this rank's heap: its descriptor, its bytes (before
    the signal pad) and the package's own mapping of it."""

    fd: int
    nbytes: int
    mirror: torch.Tensor  # uint8, the whole block (data, then the signal pad): a second mapping
    # transport -> its rendezvous handle, kept while the block lives (not the transport)
    handles: weakref.WeakKeyDictionary = field(default_factory=weakref.WeakKeyDictionary)

    @property
    def name(self) -> str:
        """Where a peer opens the block (this process's descriptor): no file in ``/dev/shm``."""
        return f"/proc/{os.getpid()}/fd/{self.fd}"

    @property
    def pad(self) -> torch.Tensor:
        return self.mirror[self.nbytes :].view(torch.int64)


blocks: dict[int, Block] = {}  # data_ptr of a live block -> the block


def allocate(shape: tuple[int, ...], dtype: torch.dtype, item: int) -> torch.Tensor:
    """A tensor of ``shape`` in a new block (``shape`` already checked)."""
    count = int(np.prod(shape, dtype=np.int64))
    nbytes = -(-max(count * item, 1) // ALIGN) * ALIGN
    fd = os.memfd_create("mycollectives-heap", os.MFD_CLOEXEC)
    try:
        os.ftruncate(fd, nbytes + PAD_BYTES)
        path = f"/proc/self/fd/{fd}"
        data = torch.from_file(path, shared=True, size=nbytes + PAD_BYTES, dtype=torch.uint8)
        mirror = torch.from_file(path, shared=True, size=nbytes + PAD_BYTES, dtype=torch.uint8)
    except BaseException:
        os.close(fd)
        raise
    ptr = data.data_ptr()
    blocks[ptr] = Block(fd, nbytes, mirror)
    weakref.finalize(data.untyped_storage(), _free, ptr)
    return data[: count * item].view(dtype).view(shape)


def _free(ptr: int) -> None:
    """The caller's storage is gone: the block leaves the registry, its descriptor closes."""
    block = blocks.pop(ptr, None)
    if block is not None:
        block.handles.clear()
        close_fds([block.fd])
        block.fd = -1


def block_of(tensor: torch.Tensor) -> tuple[Block, int] | None:
    """The heap block ``tensor`` lies in and its byte offset there, or None."""
    if not isinstance(tensor, torch.Tensor) or tensor.device.type != "cpu" or not tensor.is_contiguous():
        return None
    start = tensor.data_ptr()
    end = start + tensor.numel() * tensor.element_size()
    for ptr, block in blocks.items():
        if ptr <= start and end <= ptr + block.nbytes:
            return block, start - ptr
    return None
