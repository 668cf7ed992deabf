"""Tasks for tests/test_robust_heap.py (issue 33: offsets, sizes, errors and leaks of the heap),
run on every rank of a gloo group (see distpool.py)."""

from __future__ import annotations

import os
import threading

import torch
import torch.distributed as dist
from distpool import outcome as _outcome

import mycollectives as mc
from mycollectives import symmetric
from mycollectives.transport.shm import ShmTransport


def _group(kind: str):
    return ShmTransport(None, timeout=30) if kind == "shm" else None


def offsets(rank: int, kind: str) -> dict:
    """Rank 0 passes x[:n], the others x[n:], of one rendezvoused block: a legal layout (torch runs
    it), so the right result with the check and without it; another allocation, or the heap on one
    rank only, is refused on every rank."""
    t, n, p = _group(kind), 8, dist.get_world_size()
    x = symmetric.empty(2 * n)
    symmetric.rendezvous(x, t)
    mine = x[:n] if rank == 0 else x[n:]
    out = {}
    for check in (True, False):
        x.fill_(-99.0)  # the other half: what a read at the wrong offset would find
        mine.fill_(rank + 1.0)
        out[f"all_reduce {check}"] = _outcome(lambda: mc.all_reduce(mine, group=t, timeout=20, check=check))  # noqa: B023
        out[f"all_reduce {check} got"] = mine.tolist()
        mine.copy_(torch.arange(n) + 10.0 * rank)
        out[f"broadcast {check}"] = _outcome(lambda: mc.broadcast(mine, 0, group=t, timeout=20, check=check))  # noqa: B023
        out[f"broadcast {check} got"] = mine.tolist()
        inp = torch.full((n // p,), rank + 1.0)
        out[f"all_gather {check}"] = _outcome(
            lambda: mc.all_gather_into_tensor(mine, inp, group=t, timeout=20, check=check)  # noqa: B023
        )
        out[f"all_gather {check} got"] = mine.tolist()
    y = symmetric.empty(2 * n)  # another allocation, at the same offset: refused
    symmetric.rendezvous(y, t)
    other = x[:n] if rank == 0 else y[:n]
    out["another block"] = _outcome(lambda: mc.all_reduce(other, group=t, timeout=20))
    plain = x[:n] if rank == 0 else torch.ones(n)
    out["heap and plain"] = _outcome(lambda: mc.all_reduce(plain, group=t, timeout=20))
    x.fill_(1.0)
    out["same offset"] = _outcome(lambda: mc.all_reduce(x[n:], group=t, timeout=20))
    out["sum"] = float(x[n])
    return out


def rendezvous_errors(rank: int) -> dict:
    """Bad timeouts, a plain tensor on one rank, an absent peer: the package's errors."""
    out = {}
    x = symmetric.empty(4)
    for bad in (-1, "5", float("nan"), 0):
        out[f"timeout={bad!r}"] = _outcome(lambda: symmetric.rendezvous(x, timeout=bad))  # noqa: B023
    y = symmetric.empty(4) if rank == 0 else torch.ones(4)
    out["plain on one rank"] = _outcome(lambda: symmetric.rendezvous(y, timeout=20))
    return out


def absent_peer(rank: int) -> str:
    """Rank 0 rendezvouses alone (the group is left broken: the pool goes after)."""
    z = symmetric.empty(4)
    return _outcome(lambda: symmetric.rendezvous(z, timeout=2)) if rank == 0 else "not called"


def sizes(rank: int) -> dict:
    """Sizes torch.empty refuses are refused, and nothing of them is left (no descriptor, no file)."""
    symmetric.rendezvous(symmetric.empty(4), timeout=20)  # the group's control block, kept
    before = (_fds(), _maps())
    out = {}
    for args in ((-1,), ((-1, 4),), (1.5,), (2, -3), (-5,)):
        out[repr(args)] = _outcome(lambda: symmetric.empty(*args))  # noqa: B023
    x = symmetric.empty(16)
    h = symmetric.rendezvous(x, timeout=20)
    out["get_buffer(-1)"] = _outcome(lambda: h.get_buffer(1 - rank, (-1,), torch.float32))
    out["storage_offset=-4"] = _outcome(lambda: h.get_buffer(1 - rank, (4,), torch.float32, -4))
    del x
    h = None
    after = (_fds(), _maps())
    out["left"] = [before, after]
    return out


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _maps() -> int:
    with open("/proc/self/maps") as f:
        return sum("memfd:mycollectives" in line or "/dev/shm" in line for line in f)


def rounds(rank: int, n: int) -> dict:
    """``n`` rounds of empty/rendezvous/del: descriptors and mappings come back."""
    x = symmetric.empty(1 << 12)  # the first rendezvous also sets up the group's control block
    symmetric.rendezvous(x, timeout=30)
    del x
    fds, maps = _fds(), _maps()
    for _ in range(n):
        y = symmetric.empty(1 << 14)
        symmetric.rendezvous(y, timeout=30)
        mc.all_reduce(y, timeout=30)
        del y
    dist.barrier()
    return {"fds": (fds, _fds()), "maps": (maps, _maps()), "blocks": len(symmetric.heap.blocks)}


def killed_in_rendezvous(rank: int, victim: int) -> str:
    """``victim`` is killed while the others wait in a rendezvous it never joins."""
    x = symmetric.empty(1 << 10)
    if rank == victim:
        threading.Timer(0.5, lambda: os._exit(1)).start()
        threading.Event().wait(30)
    return _outcome(lambda: symmetric.rendezvous(x, timeout=20))


def exit_now(rank: int) -> None:
    """Allocate and rendezvous, then leave by ``os._exit`` on every rank."""
    x = symmetric.empty(1 << 16)
    symmetric.rendezvous(x, timeout=20)
    os._exit(0)
