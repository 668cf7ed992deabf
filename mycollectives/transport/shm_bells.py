"""Doorbells for the shared-memory transport (``shm.py``): how a receiver
learns that a message waits for it, and wakes up.

Each rank owns one *doorbell*, a named pipe (FIFO) that its peers write
*tokens* into: a fixed 64-byte record saying which region of shared memory
holds the message. A write of up to ``PIPE_BUF`` bytes to a pipe is atomic,
so several senders may ring one doorbell at once without their tokens
mixing. A receiver that waits sleeps in ``select()`` on its pipe and the
kernel wakes it the moment a token lands.

Why not send the token through the process group, as the transport once
did? gloo's TCP transport wakes a receiver through a loop thread per
process that polls its sockets; while a message is on its way that thread
keeps its core busy. With more processes than cores (four ranks on a
two-core laptop), a rank that is woken then waits for the poller sharing
its core to be preempted, which happens at the next scheduler tick: a round
trip between two processes on one core measured about 4 ms through gloo
(the tick of a ``HZ=250`` kernel) against about 5 us through a pipe.

Setting up is collective, like ``torch.distributed.new_group``: every rank
of the group constructs its transport, the ranks agree on a key and learn
each other's process ids (``shm_setup.everyone``), each opens every peer's
pipe for writing, and each then unlinks its own, so nothing is left in
``/dev/shm`` even if a process dies. A receiver waiting for a token checks
now and then that its sender's process still runs, so a dead sender is a
:class:`TransportPeerError` naming it, not a wait for the timeout.
"""

from __future__ import annotations

import contextlib
import os
import random
import select
import struct
import time
import weakref

import torch

from .base import TransportPeerError, TransportTimeout
from .shm_setup import alive, everyone, prefix, remove_rank, track, untrack

FIELDS = ("src", "seq", "gen", "offset", "nbytes", "nonce", "host", "oldest")
RECORD = struct.Struct(f"<{len(FIELDS)}q")  # 64 bytes, well under PIPE_BUF (4096 on Linux)
PIPE_BYTES = 1 << 20  # asked for (the default pipe holds 1024 tokens); the kernel may give less
LIVENESS_S = 0.2  # a waiting receiver checks its sender's process this often


class Doorbells:
    """One rank's doorbell and the write ends of its peers' (see the module)."""

    def __init__(self, inner, host: int, timeout: float):
        rank, world = inner.rank, inner.world_size
        mine = torch.tensor([random.SystemRandom().getrandbits(62), host, os.getpid()], dtype=torch.int64)
        every = everyone(inner, mine, timeout, "agreeing on names")
        away = [r for r in range(world) if int(every[r, 1]) != host]
        if away:
            raise ValueError(
                f"rank {rank}: ranks {away} are on another host; ShmTransport needs every rank of "
                "the group on one host (use the process group's transport across hosts)"
            )
        self.key, self.pids = int(every[0, 0]), [int(x) for x in every[:, 2]]
        self.timeout = inner.timeout
        path = self.path_of(self.key, rank)
        os.mkfifo(path, 0o600)
        track(path)
        try:
            self.fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)  # read-write: never sees end of file
            with contextlib.suppress(OSError):
                import fcntl

                fcntl.fcntl(self.fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), PIPE_BYTES)
            everyone(inner, mine[:1], timeout, "making the doorbells")  # every pipe exists
            self.peers = {
                r: os.open(self.path_of(self.key, r), os.O_WRONLY | os.O_NONBLOCK)
                for r in range(world)
                if r != rank
            }
            everyone(inner, mine[:1], timeout, "opening the doorbells")  # both ends open: the names may go
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
            untrack(path)
        self._pending = bytearray()
        self._arrived: dict[int, dict[int, tuple]] = {r: {} for r in range(world)}  # src -> {ticket: token}
        self._count = dict.fromkeys(range(world), 0)  # tokens arrived from each src
        self._posted = dict.fromkeys(range(world), 0)  # tickets handed out for each src
        self._finalizer = weakref.finalize(self, _close_all, [self.fd, *self.peers.values()])

    @staticmethod
    def path_of(key: int, rank: int) -> str:
        return prefix(key, rank) + "bell"

    def close(self) -> None:
        self._finalizer()

    def ring(self, dst: int, token: tuple) -> None:
        """Put ``token`` in ``dst``'s doorbell; waits (up to the timeout) only
        if its pipe is full, that is if ``dst`` has stopped reading."""
        data = RECORD.pack(*token)
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                os.write(self.peers[dst], data)
                return
            except BlockingIOError:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TransportTimeout(
                        f"rank {dst}'s doorbell stayed full for {self.timeout:g} s", peer=dst
                    ) from None
                select.select([], [self.peers[dst]], [], left)
            except BrokenPipeError:
                remove_rank(self.key, dst)
                raise TransportPeerError(
                    f"rank {dst} has closed its doorbell (its process ended)", peer=dst
                ) from None

    def ticket(self, src: int) -> int:
        """A place in line for the next message from ``src``: messages from
        one peer are matched to receives in the order both were posted."""
        self._posted[src] += 1
        return self._posted[src] - 1

    def take(self, src: int, ticket: int, timeout: float) -> tuple:
        """The token of message ``ticket`` from ``src``, sleeping until it
        lands (tokens from other peers read meanwhile are kept for them)."""
        waiting = self._arrived[src]
        deadline = time.monotonic() + timeout
        while ticket not in waiting:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TransportTimeout(f"no message from rank {src} after {timeout:g} s", peer=src)
            if select.select([self.fd], [], [], min(left, LIVENESS_S))[0]:
                self._read()
            elif not alive(self.pids[src]):
                self._read()  # what it sent before it died still counts
                if ticket not in waiting:
                    remove_rank(self.key, src)
                    raise TransportPeerError(f"rank {src} (process {self.pids[src]}) has exited", peer=src)
        return waiting.pop(ticket)

    def _read(self) -> None:
        with contextlib.suppress(BlockingIOError):
            self._pending += os.read(self.fd, 1 << 16)
        whole = len(self._pending) - len(self._pending) % RECORD.size
        for token in RECORD.iter_unpack(bytes(self._pending[:whole])):
            src = token[0]
            if src not in self._count:
                raise TransportPeerError(f"a token from rank {src}, who is not in this group", peer=src)
            self._arrived[src][self._count[src]] = token
            self._count[src] += 1
        del self._pending[:whole]


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)
