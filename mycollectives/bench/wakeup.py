"""How long one process takes to wake another, through gloo and through a pipe.

Two processes bounce a small message back and forth, first through a gloo
process group (``send``/``recv``: what a token through the process group
costs), then through a pair of pipes (what the shared-memory transport's
doorbells cost, ``mycollectives/transport/shm_bells.py``). ``same_core``
pins both to one core, as happens whenever ranks outnumber cores.
``round_trips_us`` returns the median round trip of each, in microseconds.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def _bounce(rank: int, store: str, fifos: list[str], same_core: bool, n: int, out) -> None:
    if same_core:
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    msg, peer = torch.zeros(16), 1 - rank
    times: dict[str, list[float]] = {"gloo": [], "pipe": []}
    for _ in range(n):
        t0 = time.perf_counter()
        if rank == 0:
            dist.send(msg, peer)
            dist.recv(msg, peer)
        else:
            dist.recv(msg, peer)
            dist.send(msg, peer)
        times["gloo"].append(time.perf_counter() - t0)
    dist.barrier()
    mine, theirs = os.open(fifos[rank], os.O_RDWR), os.open(fifos[peer], os.O_RDWR)
    for _ in range(n):
        t0 = time.perf_counter()
        if rank == 0:
            os.write(theirs, b"t" * 64)
            os.read(mine, 64)
        else:
            os.read(mine, 64)
            os.write(theirs, b"t" * 64)
        times["pipe"].append(time.perf_counter() - t0)
    os.close(mine)
    os.close(theirs)
    dist.destroy_process_group()
    if rank == 0:
        out.put({k: statistics.median(v) * 1e6 for k, v in times.items()})


def round_trips_us(same_core: bool = True, n: int = 200) -> dict[str, float]:
    """Median round trip between two fresh processes: ``{"gloo": us, "pipe": us}``."""
    if not hasattr(os, "sched_setaffinity"):
        raise RuntimeError("pinning processes to a core needs Linux (os.sched_setaffinity)")
    ctx = mp.get_context("spawn")
    out = ctx.SimpleQueue()
    with tempfile.TemporaryDirectory() as d:
        fifos = [os.path.join(d, f"bell{r}") for r in (0, 1)]
        for f in fifos:
            os.mkfifo(f)
        mp.start_processes(
            _bounce, args=(os.path.join(d, "store"), fifos, same_core, n, out), nprocs=2, start_method="spawn"
        )
    return out.get()


if __name__ == "__main__":
    for same in (True, False):
        r = round_trips_us(same)
        print(f"{'one core ' if same else 'two cores'}: gloo {r['gloo']:8.1f} us, pipe {r['pipe']:6.1f} us")
