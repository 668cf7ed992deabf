"""The handle of one rendezvoused allocation: every rank's block mapped here,
its signal pads, barriers and mailboxes (PyTorch's ``SymmetricMemory``, on CPU).

Each block ends in a *signal pad*, ``CHANNELS`` rows of one int64 per rank,
which peers write and the owner polls; then ``MAILBOX`` words a rank writes
for its peers to read (the argument check's), ``PLACES`` words where it
says at which byte offset of its block each buffer of the current call lies
(:mod:`mycollectives.loadstore` reads every peer at that peer's offset), and a
word that says "asleep: wake me" (see :meth:`SymmetricMemory._await`).
"""

from __future__ import annotations

import contextlib
import numbers
import os
import select
import time
import weakref

import numpy as np
import torch

from ..transport.base import TransportPeerError, TransportTimeout
from ..transport.shm_setup import alive

CHANNELS = 16  # rows of the signal pad
MAX_RANKS = 256
MAILBOX = 2048  # int64 words after the signal rows: a rank's word to its peers (the argument check's)
PLACES = 8  # int64 words after the mailbox: a call's buffers' byte offsets in this rank's block
PAD_BYTES = (CHANNELS * MAX_RANKS + MAILBOX + PLACES + 8) * 8  # and a word that says "asleep: wake me"
SPIN_S = 50e-6  # how long a waiter polls its pad before it polls between yields
YIELD_S = 1e-3  # how long it polls, yielding its core between looks, before it sleeps on its pipe
NAP_S = 0.002  # the longest a sleeper goes without looking at its pad (see _await)


def sizes_of(fn: str, size) -> tuple[int, ...]:
    """``size`` checked as ``torch.empty`` checks it (the same messages), as a tuple."""
    try:
        return tuple(torch.empty(size, device="meta").shape)
    except TypeError as e:
        raise TypeError(f"{fn}: {e}") from None
    except RuntimeError as e:  # torch's "negative dimension": a bad value, so a ValueError here
        raise ValueError(f"{fn}: {e}") from None


def itemsize(fn: str, dtype) -> int:
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"{fn}: argument 'dtype' must be a torch.dtype, got {dtype!r}")
    return torch.empty(0, dtype=dtype).element_size()


class SymmetricMemory:
    """Every rank's block of one allocation, mapped here; PyTorch's handle, on CPU.

    ``ident`` is the same on every rank of the rendezvous and differs between
    rendezvous: the argument check compares it, so that ranks passing tensors
    of different allocations are refused before any load. Its loads take the
    time they take (the virtual cluster's handle prices them: ``PricesLoads``)."""

    prices_loads = False

    def __init__(
        self,
        rank: int,
        world_size: int,
        segs,
        nbytes: int,
        pids,
        timeout: float,
        wake_in: int = -1,
        wake_out=None,
        ident: int = 0,
        fds=(),
    ):
        if world_size > MAX_RANKS:
            raise ValueError(f"symmetric memory here serves up to {MAX_RANKS} ranks, got {world_size}")
        self.rank, self.world_size, self.timeout, self.ident = rank, world_size, timeout, ident
        self._segs, self._nbytes, self._pids = segs, nbytes, pids
        self._expected = np.zeros((CHANNELS, world_size), dtype=np.int64)
        words = [s[nbytes:].view(torch.int64) for s in segs]
        self._pads = [w[: CHANNELS * MAX_RANKS].view(CHANNELS, MAX_RANKS) for w in words]
        at = CHANNELS * MAX_RANKS + MAILBOX
        self._mail = [w[CHANNELS * MAX_RANKS : at] for w in words]
        self._places = [w[at : at + PLACES].numpy() for w in words]
        # NumPy views of the same memory: a flag raised or read in ~0.1 us, not a torch op's ~5 us
        self._flags = [p.numpy() for p in self._pads]
        self._asleep = [w[at + PLACES :].numpy() for w in words]
        self._mail_np = [m.numpy() for m in self._mail]
        self._wake_in, self._wake_out = wake_in, wake_out or {}
        self.plans: dict = {}  # loadstore's sliced views per call shape (mycollectives.loadstore)
        self.checks = 0  # argument checks met in the mailboxes (mycollectives.api.agree)
        weakref.finalize(self, close_fds, [wake_in, *self._wake_out.values(), *fds])

    def get_buffer(self, rank: int, sizes, dtype: torch.dtype, storage_offset: int = 0) -> torch.Tensor:
        """Rank ``rank``'s block as a tensor (``storage_offset`` in elements)."""
        fn = "get_buffer"
        if not isinstance(rank, numbers.Integral) or isinstance(rank, bool):
            raise TypeError(f"{fn}: argument 'rank' must be an int, got {rank!r}")
        if not 0 <= rank < self.world_size:
            raise ValueError(f"{fn}: argument 'rank' must be in [0, {self.world_size}), got {rank}")
        if not isinstance(storage_offset, numbers.Integral) or isinstance(storage_offset, bool):
            raise TypeError(f"{fn}: argument 'storage_offset' must be an int, got {storage_offset!r}")
        if storage_offset < 0:
            raise ValueError(f"{fn}: argument 'storage_offset' must be >= 0, got {storage_offset}")
        shape, item = sizes_of(fn, sizes), itemsize(fn, dtype)
        count = int(np.prod(shape, dtype=np.int64))
        start = int(storage_offset) * item
        if start + count * item > self._nbytes:
            raise ValueError(
                f"{fn}: {count} elements at offset {storage_offset} overrun a block of {self._nbytes} bytes"
            )
        return self._segs[rank][start : start + count * item].view(dtype).view(shape)

    def get_signal_pad(self, rank: int) -> torch.Tensor:
        """Rank ``rank``'s signal pad: ``CHANNELS`` rows of one int64 per rank."""
        return self._pads[rank]

    def mailbox(self, rank: int) -> torch.Tensor:
        """Rank ``rank``'s ``MAILBOX`` int64 words, which it writes and its peers read."""
        return self._mail[rank]

    def mailboxes(self) -> list[np.ndarray]:
        """Every rank's mailbox, as NumPy views (the argument check reads them)."""
        return self._mail_np

    def places(self) -> list[np.ndarray]:
        """Every rank's ``PLACES`` words (a call's buffer offsets, which :mod:`mycollectives.loadstore`
        writes before its first barrier and reads after it), as NumPy views."""
        return self._places

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


def close_fds(fds) -> None:
    for fd in fds:
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)
