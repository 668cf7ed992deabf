"""Symmetric memory on gloo processes, for the page on loads and stores (chapter 4b).

:func:`tour` walks through the handle's calls on every rank; :func:`time_heap`
times one collective three ways in the same processes, interleaved call by
call: the package on tensors in symmetric memory (loads and stores), the
package on ordinary tensors over the shared-memory transport (messages), and
gloo's own. Run them with :class:`~mycollectives.GlooPool`::

    with mc.GlooPool(2) as pool:
        per_rank = [v for _, v in pool.run(time_heap, "all_reduce", [1 << 16], 9)]

``benchmarks/vs_mpi.py`` does the same against MPI under ``mpiexec``.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence

import torch
import torch.distributed as dist

from ... import api, symmetric
from ...collectives import busbw_factor, record
from ...transport.shm import ShmTransport

WAYS = ("loads and stores", "messages (shared memory)", "gloo")


def tour(rank: int) -> dict:
    """Allocate four floats in symmetric memory, rendezvous, read the next
    rank's buffer, signal it, and wait for the previous rank's signal."""
    p = dist.get_world_size()
    x = symmetric.empty(4)
    x.fill_(float(rank))
    handle = symmetric.rendezvous(x)  # collective: every rank maps every peer's block
    handle.barrier()  # every rank has written its buffer
    right, left = (rank + 1) % p, (rank - 1) % p
    seen = handle.get_buffer(right, (4,), torch.float32).tolist()
    handle.put_signal(right)  # raise this rank's flag in the right neighbour's signal pad
    handle.wait_signal(left)  # until the left neighbour has raised its flag in ours
    handle.barrier()
    return {"rank": rank, "read from the right": seen, "signalled by the left": True}


def time_heap(rank: int, collective: str, sizes: Sequence[int], reps: int = 9) -> dict:
    """Median seconds per call of ``collective`` at each nccl-tests ``size``, the
    three :data:`WAYS` interleaved; every rank returns its own times. A collective
    whose API runs from symmetric memory (all-reduce, all-gather, reduce-scatter,
    broadcast) runs the first way as loads and stores; any other by messages."""
    torch.set_num_threads(1)
    shm = ShmTransport(None)
    shm.settled()  # its set-up's messages cross the group's; the heap's rendezvous below must not meet them
    out: dict = {}
    try:
        for size in sizes:
            runs = _calls(collective, size, rank, dist.get_world_size(), shm)
            iters = max(1, min(50, (4 << 20) // size))
            times: dict = {way: [] for way in WAYS}
            for fn in runs.values():  # warm up: rendezvous, transports, caches
                fn()
            for rep in range(reps):
                order = WAYS[rep % 3 :] + WAYS[: rep % 3]
                for way in order:
                    dist.barrier()
                    start = time.perf_counter()
                    for _ in range(iters):
                        runs[way]()
                    times[way].append((time.perf_counter() - start) / iters)
            out[size] = {way: statistics.median(v) for way, v in times.items()}
    finally:
        shm.close()
    return out


def _calls(collective: str, size: int, rank: int, p: int, shm) -> dict:
    """The three ways of one call, each on its own buffers (its record says their sizes)."""
    c = record(collective)
    spec = c.spec(p, size)
    n_in, n_out = (
        sum(k for _, _, k in pieces) for pieces in (c.input_at(spec, rank), c.output_at(spec, rank))
    )
    op = api.ReduceOp.SUM if c.reducing else None
    native = dist.ReduceOp.SUM if c.reducing else None

    def heap(k: int) -> torch.Tensor:
        x = symmetric.empty(k)
        symmetric.rendezvous(x)
        return x.fill_(1.0)

    def pair(alloc) -> tuple[torch.Tensor, torch.Tensor]:
        inp = alloc(n_in)
        return inp, inp if c.in_place else alloc(n_out)

    s, m, g = pair(heap), pair(torch.ones), pair(torch.ones)  # the first: both tensors in symmetric memory
    return {
        WAYS[0]: lambda: c.call(api, *s, op, 0, None, rank, spec=spec),
        WAYS[1]: lambda: c.call(api, *m, op, 0, shm, rank, spec=spec),
        WAYS[2]: lambda: c.call(dist, *g, native, 0, None, rank, spec=spec),
    }


def summarize(per_rank: Sequence[dict], collective: str) -> list[dict]:
    """Per size: the slowest rank's median time of each way and its busbw (GB/s)."""
    p = len(per_rank)
    rows = []
    for size in per_rank[0]:
        row: dict = {"size": size}
        for way in WAYS:
            sec = max(r[size][way] for r in per_rank)
            row[way] = size / sec / 1e9 * busbw_factor(collective, p)
        rows.append(row)
    return rows
