"""Symmetric memory: tensors every rank of a host can read and write (chapter 4).

The transports pass messages: a sender copies bytes out, a receiver copies
them in. With *symmetric memory* every rank allocates the same buffer in a
heap its peers map, so a rank reads (or writes) a peer's buffer directly;
PyTorch's ``torch.distributed._symmetric_memory``, NCCL's symmetric windows
and NVLink's multimem instructions are built on the idea. This module has
PyTorch's shape of API::

    t = mc.symmetric.empty(1024, dtype=torch.float32)   # in this rank's heap
    h = mc.symmetric.rendezvous(t, group)                # collective: map every peer's
    h.get_buffer(peer, (1024,), torch.float32)           # the peer's t, readable here
    h.barrier()                                          # on the signal pads

On CPU ranks of one host the heap is shared memory: each allocation is a
``multiprocessing.shared_memory`` segment (so Python's resource tracker
removes it if the process dies), mapped as a tensor with ``torch.from_file``;
after the rendezvous every rank has mapped every peer's segment and the
names are unlinked, so nothing stays in ``/dev/shm``. Each segment ends in a
*signal pad*, ``CHANNELS`` rows of one int64 per rank, which peers write and
the owner polls (:meth:`SymmetricMemory.barrier`). On CUDA, :func:`empty`
and :func:`rendezvous` are torch's own. A rank on another host, or a tensor
outside the heap, is refused before anything moves.
"""

from __future__ import annotations

import contextlib
import os
import select
import time
import weakref
from dataclasses import dataclass, field
from multiprocessing import resource_tracker, shared_memory

import numpy as np
import torch

from .transport.base import TransportPeerError, TransportTimeout
from .transport.shm_regions import host_id
from .transport.shm_setup import alive, everyone

CHANNELS = 16  # rows of the signal pad
MAX_RANKS = 256
MAILBOX = 1024  # int64 words after the signal rows: a rank's word to its peers (the argument check's)
PAD_BYTES = (CHANNELS * MAX_RANKS + MAILBOX + 8) * 8  # and a word that says "asleep: wake me"
SPIN_S = 50e-6  # how long a waiter polls its pad before it polls between yields
YIELD_S = 1e-3  # how long it polls, yielding its core between looks, before it sleeps on its pipe
NAP_S = 0.002  # the longest a sleeper goes without looking at its pad (see _await)
ALIGN = 4096


@dataclass(eq=False)
class _Block:
    """One allocation of this rank's heap: its segment's name and its bytes."""

    name: str
    data: torch.Tensor  # uint8, the whole segment (data, then the signal pad)
    nbytes: int  # of data, before the pad
    handles: dict = field(default_factory=dict)  # transport -> SymmetricMemory

    @property
    def pad(self) -> torch.Tensor:
        return self.data[self.nbytes :].view(torch.int64)


_blocks: dict[int, _Block] = {}  # data_ptr of a block -> the block


def empty(*size, dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu") -> torch.Tensor:
    """A tensor in symmetric memory (allocate the same on every rank, then :func:`rendezvous`)."""
    shape = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)) else size
    device = torch.device(device)
    if device.type == "cuda":
        import torch.distributed._symmetric_memory as symm

        return symm.empty(shape, dtype=dtype, device=device)
    if device.type != "cpu":
        raise ValueError(f"symmetric.empty: device must be cpu or cuda, got {device}")
    nbytes = max(int(np.prod(shape, dtype=np.int64)) * torch.empty(0, dtype=dtype).element_size(), 1)
    nbytes = -(-nbytes // ALIGN) * ALIGN
    seg = shared_memory.SharedMemory(create=True, size=nbytes + PAD_BYTES)
    seg.close()  # torch maps the file itself, and owns that mapping's lifetime
    data = torch.from_file(f"/dev/shm/{seg.name}", shared=True, size=nbytes + PAD_BYTES, dtype=torch.uint8)
    block = _Block(seg.name, data, nbytes)
    block.pad.zero_()
    _blocks[data.data_ptr()] = block
    weakref.finalize(data, _forget, data.data_ptr(), seg.name)
    count = int(np.prod(shape, dtype=np.int64))
    return data[: count * torch.empty(0, dtype=dtype).element_size()].view(dtype).view(shape)


def _forget(ptr: int, name: str) -> None:
    _blocks.pop(ptr, None)
    _unlink(name)


_unlinked: set[str] = set()


def _unlink(name: str) -> None:
    """Remove a block's name (once): its memory lives on while mapped."""
    if name in _unlinked:
        return
    _unlinked.add(name)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(f"/dev/shm/{name}")
    with contextlib.suppress(Exception):
        resource_tracker.unregister("/" + name, "shared_memory")


def block_of(tensor: torch.Tensor) -> tuple[_Block, int] | None:
    """The heap block ``tensor`` lies in and its byte offset there, or None."""
    if tensor.device.type != "cpu" or not tensor.is_contiguous():
        return None
    start = tensor.data_ptr()
    end = start + tensor.numel() * tensor.element_size()
    for ptr, block in _blocks.items():
        if ptr <= start and end <= ptr + block.nbytes:
            return block, start - ptr
    return None


def handle_of(tensor: torch.Tensor, transport) -> SymmetricMemory | None:
    """The rendezvous of the block ``tensor`` lies in, on ``transport``'s group, or None."""
    found = block_of(tensor)
    return found[0].handles.get(transport) if found else None


def rendezvous(tensor: torch.Tensor, group=None, timeout: float | None = None) -> SymmetricMemory:
    """Map every peer's block of ``tensor`` (collective: every rank of ``group`` calls it)."""
    from .transport import resolve_group

    t = resolve_group(group)
    if tensor.device.type == "cuda":
        import torch.distributed._symmetric_memory as symm

        return symm.rendezvous(tensor, group)
    found = block_of(tensor)
    if found is None:
        raise ValueError(
            f"rendezvous on rank {t.rank}: argument 'tensor' is not in symmetric memory; "
            "allocate it with mycollectives.symmetric.empty"
        )
    block, _ = found
    if t in block.handles:
        return block.handles[t]
    if t.local:
        raise ValueError(
            f"rendezvous on rank {t.rank}: symmetric memory needs processes on one host (a gloo group), "
            "not a local world"
        )
    t_p2p = getattr(t, "inner", t)  # the process group's own send and receive
    name = np.frombuffer(block.name.encode().ljust(32, b"\0"), dtype=np.int64)
    mine = torch.tensor([host_id(), os.getpid(), block.nbytes, *name], dtype=torch.int64)
    wake = f"/dev/shm/{block.name}-wake"  # this rank's wake-up pipe: peers write a byte per signal
    if not os.path.exists(wake):
        os.mkfifo(wake, 0o600)
    wake_in = os.open(wake, os.O_RDWR | os.O_NONBLOCK)
    try:
        segs, pids, wake_out = _attach(t, t_p2p, block, mine, timeout or t.timeout)
    except BaseException:
        _close_fds([wake_in])
        raise
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(wake)
    handle = SymmetricMemory(t.rank, t.world_size, segs, block.nbytes, pids, t.timeout, wake_in, wake_out)
    block.handles[t] = handle
    return handle


def _attach(t, p2p, block: _Block, mine: torch.Tensor, timeout: float):
    """Exchange with every rank, check, and map every peer's block and wake-up pipe."""
    rows = everyone(p2p, mine, timeout, "symmetric memory rendezvous")
    away = [r for r in range(t.world_size) if int(rows[r, 0]) != int(mine[0])]
    if away:
        raise ValueError(
            f"rendezvous on rank {t.rank}: ranks {away} are on another host; symmetric memory is per host"
        )
    sizes = {int(rows[r, 2]) for r in range(t.world_size)}
    if len(sizes) != 1:
        raise ValueError(
            f"rendezvous on rank {t.rank}: ranks allocated blocks of different sizes {sorted(sizes)}"
        )
    segs, pids, wake_out = [], [int(x) for x in rows[:, 1]], {}
    for r in range(t.world_size):
        if r == t.rank:
            segs.append(block.data)
            continue
        peer = rows[r, 3:].numpy().tobytes().rstrip(b"\0").decode()
        segs.append(
            torch.from_file(f"/dev/shm/{peer}", shared=True, size=block.nbytes + PAD_BYTES, dtype=torch.uint8)
        )
        wake_out[r] = os.open(f"/dev/shm/{peer}-wake", os.O_WRONLY | os.O_NONBLOCK)
    everyone(p2p, mine[:1], timeout, "symmetric memory mapped")  # every peer has mapped ours
    _unlink(block.name)  # the memory lives while mapped; nothing stays in /dev/shm
    return segs, pids, wake_out


class SymmetricMemory:
    """Every rank's block of one allocation, mapped here; PyTorch's handle, on CPU."""

    def __init__(
        self, rank: int, world_size: int, segs, nbytes: int, pids, timeout: float, wake_in=-1, wake_out=None
    ):
        if world_size > MAX_RANKS:
            raise ValueError(f"symmetric memory here serves up to {MAX_RANKS} ranks, got {world_size}")
        self.rank, self.world_size, self.timeout = rank, world_size, timeout
        self._segs, self._nbytes, self._pids = segs, nbytes, pids
        self._expected = np.zeros((CHANNELS, world_size), dtype=np.int64)
        words = [s[nbytes:].view(torch.int64) for s in segs]
        self._pads = [w[: CHANNELS * MAX_RANKS].view(CHANNELS, MAX_RANKS) for w in words]
        self._mail = [w[CHANNELS * MAX_RANKS : CHANNELS * MAX_RANKS + MAILBOX] for w in words]
        # NumPy views of the same memory: a flag raised or read in ~0.1 us, not a torch op's ~5 us
        self._flags = [p.numpy() for p in self._pads]
        self._asleep = [w[CHANNELS * MAX_RANKS + MAILBOX :].numpy() for w in words]
        self._mail_np = [m.numpy() for m in self._mail]
        self._wake_in, self._wake_out = wake_in, wake_out or {}
        self.plans: dict = {}  # loadstore's sliced views per call shape (mycollectives.loadstore)
        weakref.finalize(self, _close_fds, [wake_in, *self._wake_out.values()])

    def get_buffer(self, rank: int, sizes, dtype: torch.dtype, storage_offset: int = 0) -> torch.Tensor:
        """Rank ``rank``'s block as a tensor (``storage_offset`` in elements)."""
        item = torch.empty(0, dtype=dtype).element_size()
        count = int(np.prod(sizes, dtype=np.int64))
        start = storage_offset * item
        if start + count * item > self._nbytes:
            raise ValueError(
                f"get_buffer: {count} elements at offset {storage_offset} overrun a block of {self._nbytes} bytes"
            )
        return self._segs[rank][start : start + count * item].view(dtype).view(tuple(sizes))

    def get_signal_pad(self, rank: int) -> torch.Tensor:
        """Rank ``rank``'s signal pad: ``CHANNELS`` rows of one int64 per rank."""
        return self._pads[rank]

    def mailbox(self, rank: int) -> torch.Tensor:
        """Rank ``rank``'s ``MAILBOX`` int64 words, which it writes and its peers read."""
        return self._mail[rank]

    def mailboxes(self) -> list[np.ndarray]:
        """Every rank's mailbox, as NumPy views (the argument check reads them)."""
        return self._mail_np

    @property
    def nbytes(self) -> int:
        return self._nbytes

    def segment(self, rank: int) -> torch.Tensor:
        """Rank ``rank``'s whole block, as bytes."""
        return self._segs[rank]

    def put_signal(self, dst: int, channel: int = 0) -> None:
        """Raise this rank's flag in ``dst``'s pad (one more on ``channel``), and
        wake ``dst`` if it sleeps (a byte in its pipe; a waiter polls only
        briefly, so no rank spins long on a core its peers need)."""
        self._flags[dst][channel, self.rank] += 1
        fd = self._wake_out.get(dst)
        if fd is not None and self._asleep[dst][0]:
            try:
                os.write(fd, b"s")
            except BlockingIOError:
                pass  # a full pipe wakes its reader as well as one byte more would
            except BrokenPipeError:
                raise TransportPeerError(
                    f"rank {dst} has closed its wake-up pipe (its process ended)", peer=dst
                ) from None

    def wait_signal(self, src: int, channel: int = 0, timeout: float | None = None) -> None:
        """Wait until ``src`` has raised its flag in this rank's pad once more than seen so far."""
        self._await(channel, [src], timeout)

    def barrier(self, channel: int = 0, timeout: float | None = None) -> None:
        """Every rank signals every rank on ``channel``, then waits for all of them."""
        for r in range(self.world_size):
            if r != self.rank:
                self.put_signal(r, channel)
        self._await(channel, [r for r in range(self.world_size) if r != self.rank], timeout)

    def _await(self, channel: int, sources: list[int], timeout: float | None) -> None:
        """Poll the pad for ``SPIN_S`` (a peer a moment behind costs no system
        call, on either side), then until ``YIELD_S`` poll with a
        ``sched_yield`` between looks (a peer that shares this core runs at
        once, as MPICH's polling yields), then sleep on the wake-up pipe with
        the "asleep" word raised, so that signallers know to write to it. A
        signaller may read that word just before the sleeper raises it (the
        processor may reorder a store and a later load); the sleeper then finds
        the flag on its next look, at most ``NAP_S`` later, never a hang."""
        want = self._expected[channel]
        want[sources] += 1
        pad = self._flags[self.rank][channel]
        if len(sources) == 1:
            src, need = sources[0], int(want[sources[0]])

            def met() -> bool:
                return pad[src] >= need
        else:
            idx, need_all = np.asarray(sources), want[sources].copy()

            def met() -> bool:
                return bool((pad[idx] >= need_all).all())

        start = time.perf_counter()
        while time.perf_counter() - start < SPIN_S:
            if met():
                return
        while time.perf_counter() - start < YIELD_S:
            os.sched_yield()
            if met():
                return
        deadline = time.monotonic() + (timeout or self.timeout)
        asleep = self._asleep[self.rank]
        last_check = time.monotonic()
        while True:
            asleep[0] = 1
            if met():
                asleep[0] = 0
                return
            now = time.monotonic()
            left = deadline - now
            if left <= 0:
                asleep[0] = 0
                late = [s for s in sources if pad[s] < want[s]]
                raise TransportTimeout(f"no signal from rank {late[0]} on channel {channel}", peer=late[0])
            if self._wake_in >= 0 and select.select([self._wake_in], [], [], min(left, NAP_S))[0]:
                with contextlib.suppress(BlockingIOError):
                    os.read(self._wake_in, 1 << 16)
            elif self._wake_in < 0:
                time.sleep(min(left, NAP_S))
            if now - last_check > 0.2:  # now and then: has a peer we wait for died?
                last_check = now
                dead = [s for s in sources if pad[s] < want[s] and not alive(self._pids[s])]
                if dead:
                    asleep[0] = 0
                    raise TransportPeerError(
                        f"rank {dead[0]} (process {self._pids[dead[0]]}) has exited", peer=dead[0]
                    )


def _close_fds(fds) -> None:
    for fd in fds:
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)


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
