"""Tasks for tests/test_symmetric.py, run on every rank of a gloo group (see distpool.py)."""

from __future__ import annotations

import hashlib
import os
import time

import torch
import torch.distributed as dist

import mycollectives as mc
from mycollectives import symmetric
from mycollectives.algorithms import uses
from mycollectives.transport.shm import ShmTransport


def _heap(n: int, dtype=torch.float32, t=None) -> torch.Tensor:
    x = symmetric.empty(n, dtype=dtype)
    symmetric.rendezvous(x, t)
    return x


def every_algorithm(rank: int, kind: str) -> list[str]:
    """Every algorithm of the four tensor collectives, on tensors in symmetric
    memory, against torch.distributed's own; counts that do and do not divide."""
    t = ShmTransport(None, timeout=30) if kind == "shm" else None
    p, problems = dist.get_world_size(), []
    for n, dtype in ((1, torch.float32), (2 * p + 3, torch.int64), (5000, torch.float32)):
        x = _heap(n, dtype, t)
        for alg in ("auto", *mc.algorithms("all_reduce")):
            kw = {"local_size": 1} if alg != "auto" and "local_size" in uses("all_reduce", alg) else {}
            x.copy_((torch.arange(n) % 17 + rank).to(dtype))
            want = x.clone()
            dist.all_reduce(want)
            mc.all_reduce(x, group=t, algorithm=alg, **kw)
            if not torch.equal(x, want):
                problems.append(f"all_reduce {alg} n={n} {dtype}")
        for alg in ("auto", *mc.algorithms("broadcast")):
            x.copy_((torch.arange(n) + 10 * rank).to(dtype))
            want = x.clone()
            dist.broadcast(want, p - 1)
            mc.broadcast(x, p - 1, group=t, algorithm=alg)
            if not torch.equal(x, want):
                problems.append(f"broadcast {alg} n={n}")
        out, inp = _heap(p * n, dtype, t), (torch.arange(n) * (rank + 1)).to(dtype)
        want = torch.empty(p * n, dtype=dtype)
        dist.all_gather_into_tensor(want, inp)
        for alg in ("auto", *mc.algorithms("all_gather")):
            out.zero_()
            mc.all_gather_into_tensor(out, inp, group=t, algorithm=alg)
            if not torch.equal(out, want):
                problems.append(f"all_gather {alg} n={n}")
        src = _heap(p * n, dtype, t)
        src.copy_((torch.arange(p * n) % 11 + rank).to(dtype))
        keep, got, want = src.clone(), torch.empty(n, dtype=dtype), torch.empty(n, dtype=dtype)
        dist.reduce_scatter_tensor(want, keep.clone())
        for alg in ("auto", *mc.algorithms("reduce_scatter")):
            mc.reduce_scatter_tensor(got, src, group=t, algorithm=alg)
            if not torch.equal(got, want) or not torch.equal(src, keep):
                problems.append(f"reduce_scatter {alg} n={n}")
    return problems


def ran_as_loads(rank: int) -> dict:
    """Which path a call takes: symmetric memory runs no message for its rounds."""
    t = ShmTransport(None, timeout=30)
    x = _heap(1 << 12, t=t)
    sent = []
    original = t.isend

    def counting(tensor, dst, tag=0, label=None):
        sent.append(label.collective if label else "?")
        return original(tensor, dst, tag, label)

    t.isend = counting
    mc.all_reduce(x, group=t, algorithm="ring")
    on_heap = len(sent)
    mc.all_reduce(torch.ones(1 << 12), group=t, algorithm="ring")
    return {"heap_messages": on_heap, "plain_messages": len(sent) - on_heap}


def refusals(rank: int) -> list[str]:
    """A tensor outside the heap, and ranks that disagree on it: clear errors."""
    out = []
    try:
        symmetric.rendezvous(torch.ones(4))
    except ValueError as e:
        out.append(str(e))
    x = _heap(8)
    y = x if rank == 0 else torch.ones(8)  # rank 0 in symmetric memory, the others not
    try:
        mc.all_reduce(y, timeout=10)
    except (ValueError, mc.CollectiveError) as e:
        out.append(f"{type(e).__name__}: {e}")
    return out


def another_host(rank: int) -> str:
    """Rank 1 pretends to be on another host: the rendezvous refuses before mapping anything."""
    from mycollectives import symmetric as sm

    real = sm.host_id
    sm.host_id = (lambda: real() ^ 1) if rank == 1 else real
    try:
        sm.rendezvous(sm.empty(8))
    except ValueError as e:
        return str(e)
    finally:
        sm.host_id = real
    return "no error"


def signals(rank: int) -> dict:
    """PyTorch's handle: peers' buffers, signal pads, put/wait_signal, barrier; then /dev/shm."""
    x = symmetric.empty(16)
    h = symmetric.rendezvous(x)
    p = h.world_size
    x.fill_(rank)
    h.barrier()
    seen = [float(h.get_buffer(r, (16,), torch.float32)[3]) for r in range(p)]
    h.barrier()
    nxt, prev = (rank + 1) % p, (rank - 1) % p
    h.get_buffer(nxt, (16,), torch.float32)[0] = 100 + rank  # a store into the next rank's buffer
    h.put_signal(nxt, channel=3)
    h.wait_signal(prev, channel=3)
    got = float(x[0])
    h.barrier()
    name = symmetric.block_of(x)[0].name  # this rank's block, and its wake-up pipe: both unlinked
    left = [f for f in (name, f"{name}-wake") if os.path.exists(f"/dev/shm/{f}")]
    return {"seen": seen, "from_prev": got, "pad_shape": tuple(h.get_signal_pad(rank).shape), "left": left}


def killed_during_loads(rank: int, victim: int) -> str:
    """``victim`` dies in a stream of all-reduces on symmetric memory."""
    import threading

    x = _heap(1 << 16)
    if rank == victim:
        threading.Timer(0.3, lambda: os._exit(1)).start()
    try:
        for _ in range(100000):
            mc.all_reduce(x, algorithm="ring", timeout=10, check=False)
            time.sleep(0)
    except mc.CollectiveError as e:
        return f"{type(e).__name__}: {e}"
    return "completed"


def identical_across_ranks(rank: int) -> dict:
    """Random floats: every algorithm's result, on symmetric memory, the same bits on every rank."""
    x = _heap(999)
    out = {}
    for alg in mc.algorithms("all_reduce"):
        kw = {"local_size": 1} if "local_size" in uses("all_reduce", alg) else {}
        x.copy_(torch.randn(999, generator=torch.Generator().manual_seed(rank)))
        mc.all_reduce(x, algorithm=alg, **kw)
        out[alg] = hashlib.sha256(x.numpy().tobytes()).hexdigest()
    return out
