"""The rendezvous: every rank maps every peer's block and wake-up pipe.

Each rank sends its peers one row: its host, process id, block size, the
descriptors of its block and of its wake-up pipe (an anonymous pipe; a peer
opens its write end through ``/proc/<pid>/fd/<fd>``), and whether its tensor
is in the heap at all; a random number makes the rendezvous's identity
(the same on every rank) unique. Every rank checks every row alike, so a bad call
raises on every rank, not on one while the others wait out the timeout.
"""

from __future__ import annotations

import hashlib
import os
import secrets

import torch

from ..transport.base import TransportPeerError
from ..transport.shm_setup import alive, everyone
from .handle import PAD_BYTES, SymmetricMemory, close_fds
from .heap import Block

_ROW = 7  # in heap (1) or not (0), host, pid, block bytes, block fd, wake-up pipe fd, a random number


def exchange(p2p, block: Block | None, host: int, wake: int, timeout: float) -> torch.Tensor:
    """Every rank's row (see the module); ``block`` None: this rank's tensor is not in the heap."""
    mine = torch.zeros(_ROW, dtype=torch.int64)
    if block is not None:
        mine[:] = torch.tensor([1, host, os.getpid(), block.nbytes, block.fd, wake, secrets.randbits(62)])
    return everyone(p2p, mine, timeout, "symmetric memory rendezvous")


def refusal(rank: int, rows: torch.Tensor) -> str | None:
    """Why the rendezvous cannot go on (the same text on every rank), or None."""
    p = len(rows)
    outside = [r for r in range(p) if not int(rows[r, 0])]
    if outside:
        return (
            f"ranks {outside} passed a tensor that is not in symmetric memory; "
            "allocate it with mycollectives.symmetric.empty on every rank"
        )
    away = [r for r in range(p) if int(rows[r, 1]) != int(rows[rank, 1])]
    if away:
        return f"ranks {away} are on another host; symmetric memory is per host"
    sizes = {int(rows[r, 3]) for r in range(p)}
    if len(sizes) != 1:
        shown = ", ".join(f"rank {r}: {int(rows[r, 3])}" for r in range(p))
        return (
            f"ranks allocated blocks of different sizes in bytes ({shown}); allocate the same on every rank"
        )
    return None


def attach(
    rank: int, p2p, block: Block, rows: torch.Tensor, wake: tuple[int, int], timeout: float, t_timeout
):
    """Map every peer's block and open its wake-up pipe; the handle (``wake``: this rank's pipe)."""
    p, size = len(rows), block.nbytes + PAD_BYTES
    segs, wake_out = [], {}
    try:
        for q in range(p):
            if q == rank:
                segs.append(block.mirror)
                continue
            pid, fd, pipe = (int(x) for x in rows[q, 2:][[0, 2, 3]])
            try:
                segs.append(
                    torch.from_file(f"/proc/{pid}/fd/{fd}", shared=True, size=size, dtype=torch.uint8)
                )
                wake_out[q] = os.open(f"/proc/{pid}/fd/{pipe}", os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            except (OSError, RuntimeError) as e:
                if not alive(pid):
                    raise TransportPeerError(
                        f"rank {q} (process {pid}) ended during the rendezvous", peer=q
                    ) from e
                raise TransportPeerError(f"cannot map rank {q}'s block (process {pid}): {e}", peer=q) from e
        everyone(
            p2p, rows[rank, :1].clone(), timeout, "symmetric memory mapped"
        )  # every peer has mapped ours
    except BaseException:
        close_fds(wake_out.values())
        raise
    ident = int.from_bytes(hashlib.blake2b(rows.numpy().tobytes(), digest_size=8).digest(), "little") >> 2
    pids = [int(x) for x in rows[:, 2]]
    return SymmetricMemory(
        rank, p, segs, block.nbytes, pids, t_timeout, wake[0], wake_out, ident, fds=[wake[1]]
    )
