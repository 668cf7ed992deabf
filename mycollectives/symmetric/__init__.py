"""Symmetric memory: tensors every rank of a host can read and write (chapter 4).

The transports pass messages: a sender copies bytes out, a receiver copies
them in. With *symmetric memory* every rank allocates the same buffer in a
heap its peers map, so a rank reads (or writes) a peer's buffer directly;
PyTorch's ``torch.distributed._symmetric_memory``, NCCL's symmetric windows
and NVLink's multimem instructions are built on the idea. This package has
PyTorch's shape of API::

    t = mc.symmetric.empty(1024, dtype=torch.float32)   # in this rank's heap
    h = mc.symmetric.rendezvous(t, group)                # collective: map every peer's
    h.get_buffer(peer, (1024,), torch.float32)           # the peer's t, readable here
    h.barrier()                                          # on the signal pads

Three parts: :mod:`.heap` allocates blocks (anonymous shared memory, never
a name in ``/dev/shm``) and frees each with its tensor; :mod:`.attach` is
the rendezvous, where every rank maps every peer's block; :mod:`.handle` is
what a rendezvous returns, with the signal pads and barriers. On CUDA,
:func:`empty` and :func:`rendezvous` are torch's own. A rank on another
host, or a tensor outside the heap on any rank, is refused on every rank
before anything moves; failures are the package's errors
(:mod:`mycollectives.errors`). A transport whose ranks share one process
and declare it (``hosts_heap``: the virtual cluster's, whose loads then take
virtual time, :mod:`mycollectives.virtual.heap`) does the rendezvous itself.

The first rendezvous on a group also sets up a small *control* block for
that group: the argument check of every later collective on the group meets
there (:func:`control`), whether or not the call's tensors are in the heap,
so ranks that disagree on it are told so instead of waiting for each other.
"""

from __future__ import annotations

import datetime
import math
import numbers
import os
import weakref
from dataclasses import dataclass

import torch

from ..errors import CollectiveTimeout, PeerError
from ..transport.base import TransportPeerError, TransportTimeout
from ..transport.contract import capabilities
from ..transport.shm_regions import host_id
from .attach import attach, exchange, refusal
from .handle import CHANNELS, MAILBOX, MAX_RANKS, PAD_BYTES, SymmetricMemory, close_fds, itemsize, sizes_of
from .heap import ALIGN, Block, allocate, block_of

__all__ = [
    "ALIGN",
    "CHANNELS",
    "MAILBOX",
    "MAX_RANKS",
    "PAD_BYTES",
    "Placement",
    "SymmetricMemory",
    "block_of",
    "control",
    "empty",
    "handle_of",
    "rendezvous",
    "workspace",
]


def empty(*size, dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu") -> torch.Tensor:
    """A tensor in symmetric memory (allocate the same on every rank, then :func:`rendezvous`).

    ``size`` is checked as ``torch.empty`` checks it (a negative or
    non-integer size raises, with torch's message, and allocates nothing)."""
    shape = size[0] if len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)) else size
    shape = sizes_of("symmetric.empty", shape)
    item = itemsize("symmetric.empty", dtype)
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise ValueError(f"symmetric.empty: argument 'device': {e}") from None
    if device.type == "cuda":
        import torch.distributed._symmetric_memory as symm

        return symm.empty(shape, dtype=dtype, device=device)
    if device.type != "cpu":
        raise ValueError(f"symmetric.empty: device must be cpu or cuda, got {device}")
    return allocate(shape, dtype, item)


@dataclass(frozen=True)
class Placement:
    """Where a call's tensor lies: its rendezvous ``handle`` on the call's
    group, on which every rank must agree before any load, and its byte
    ``offset`` in the block, which may differ from rank to rank
    (:mod:`mycollectives.api.agree`, :mod:`mycollectives.loadstore`)."""

    handle: SymmetricMemory
    offset: int

    @property
    def ident(self) -> int:
        return self.handle.ident


def handle_of(tensor: torch.Tensor, transport) -> Placement | None:
    """Where ``tensor`` lies in a block rendezvoused on ``transport``'s group, or None."""
    found = block_of(tensor)
    if found is None:
        return None
    handle = found[0].handles.get(transport)
    return Placement(handle, found[1]) if handle is not None else None


_controls: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # transport -> (tensor, handle)


def control(transport) -> SymmetricMemory | None:
    """The group's control block (see the module), or None before its first rendezvous."""
    found = _controls.get(transport)
    return found[1] if found is not None else None


def _seconds(timeout) -> float | None:
    if isinstance(timeout, datetime.timedelta):
        timeout = timeout.total_seconds()
    if timeout is None:
        return None
    real = isinstance(timeout, numbers.Real) and not isinstance(timeout, bool)
    if not real or not math.isfinite(timeout) or timeout <= 0:
        raise (ValueError if real else TypeError)(
            f"argument 'timeout' must be a positive, finite number of seconds, got {timeout!r}"
        )
    return float(timeout)


def rendezvous(tensor: torch.Tensor, group=None, timeout: float | None = None) -> SymmetricMemory:
    """Map every peer's block of ``tensor`` (collective: every rank of ``group`` calls it).

    Raises ``ValueError`` on every rank if any rank's tensor is not in
    symmetric memory, ranks are on different hosts or allocated different
    sizes; :class:`~mycollectives.errors.CollectiveTimeout` if a rank does
    not join within ``timeout``, :class:`~mycollectives.errors.PeerError` if
    one has died."""
    from ..transport import NotInGroup, resolve_group

    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"rendezvous: argument 'tensor' must be a torch.Tensor, got {type(tensor).__name__}")
    seconds = _seconds(timeout)
    try:
        t = resolve_group(group, seconds)
    except NotInGroup as e:
        raise ValueError(f"rendezvous: {e}") from None
    if tensor.device.type == "cuda":
        import torch.distributed._symmetric_memory as symm

        return symm.rendezvous(tensor, group)
    found = block_of(tensor)
    if found is not None and t in found[0].handles:
        return found[0].handles[t]
    caps = capabilities(t)
    if not caps.heap_loads:
        raise ValueError(
            f"rendezvous on rank {t.rank}: symmetric memory needs processes on one host (a gloo group), "
            "not a local world"
        )
    join = _hosted if caps.hosts_heap else _join
    try:
        handle = join(t, found[0] if found else None, seconds or t.timeout)
        if t not in _controls:  # the group's control block: the first rendezvous on it sets it up
            block = allocate((1,), torch.uint8, 1)
            _controls[t] = (block, join(t, block_of(block)[0], seconds or t.timeout, control=True))
    except TransportTimeout as e:
        raise CollectiveTimeout(f"rendezvous on rank {t.rank}: {e}") from e
    except TransportPeerError as e:
        raise PeerError(f"rendezvous on rank {t.rank}: {e}") from e
    return handle


def _hosted(t, block: Block | None, timeout: float, control: bool = False) -> SymmetricMemory:
    """The rendezvous of ``block`` on a transport that hosts its ranks' heap (``HostsHeap``)."""
    handle = t.join_heap(block, control)
    block.handles[t] = handle
    return handle


def _join(t, block: Block | None, timeout: float, control: bool = False) -> SymmetricMemory:
    """The rendezvous of ``block`` (None: this rank's tensor is outside the heap) on ``t``."""
    p2p = t.point_to_point()  # the process group's own send and receive
    t.settled()  # a shared-memory transport's own set-up messages first
    wake = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)  # this rank's wake-up pipe: peers write a byte per signal
    try:
        rows = exchange(p2p, block, host_id(), wake[0], timeout)
        if (why := refusal(t.rank, rows)) is not None:
            raise ValueError(f"rendezvous on rank {t.rank}: {why}")
        handle = attach(t.rank, p2p, block, rows, wake, timeout, t.timeout)
    except BaseException:
        close_fds(wake)
        raise
    block.handles[t] = handle
    return handle


_workspaces: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def workspace(transport, slot: str, numel: int, dtype: torch.dtype) -> torch.Tensor:
    """``numel`` elements of symmetric memory kept per (transport, slot), grown on
    demand: a collective's scratch, when its tensors are in symmetric memory.
    Collective the first time (and whenever it grows): every rank must ask alike."""
    item = torch.empty(0, dtype=dtype).element_size()
    slots = _workspaces.setdefault(transport, {})
    block = slots.get(slot)
    if block is None or block.numel() < numel * item:
        block = slots[slot] = empty(max(numel * item, 1), dtype=torch.uint8)
        rendezvous(block, transport)
    return block[: numel * item].view(dtype)
