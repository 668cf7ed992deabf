"""Per-message overhead of the package's NCCL path against native NCCL (lab 2).

Run under torchrun on GPUs, one rank per GPU::

    torchrun --standalone --nproc-per-node 2 benchmarks/nccl_overhead.py --json out.json

* With two or more ranks, ranks 0 and 1 play ping-pong for each size: natively
  (``dist.batch_isend_irecv`` then ``work.wait()`` and a stream synchronize,
  what a torch program does) and through the package's transport
  (:class:`~mycollectives.transport.torch_dist.TorchDistTransport`: the same
  batched NCCL calls, then its wait: stream order, a spin on a CUDA event,
  then a sleep on it with a timeout). Half the round trip is one message's
  time; the difference is what the package adds per message.
* With one rank (one GPU: NCCL refuses two ranks on one device) there is no
  peer: the script times one NCCL all-reduce of a world of one, waited for
  natively and through the package's wait, which isolates the wait's cost.

Every number is a median over ``--reps`` timed repetitions of ``--iters``
messages; the JSON holds the GPU's name, driver, torch and NCCL versions.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch
import torch.distributed as dist

from mycollectives.transport.message import Message
from mycollectives.transport.torch_dist import TorchDistTransport, _DistWork

SIZES = [4 << k for k in range(0, 19, 3)]  # 4 B .. 1 MiB


def _median_us(fn, iters: int, reps: int) -> float:
    fn()  # warm up (the first message sets up NCCL's connection)
    times = []
    for _ in range(reps):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) / iters)
    return statistics.median(times) * 1e6


def _pingpong(t: torch.Tensor, rank: int, transport: TorchDistTransport | None):
    """One round trip between ranks 0 and 1 (others idle)."""
    peer = 1 - rank

    def native():
        order = [(dist.isend, dist.irecv), (dist.irecv, dist.isend)][rank]
        for op in order:  # the host learns of each message, as the package's wait does
            for w in dist.batch_isend_irecv([dist.P2POp(op, t, peer)]):
                w.wait()
            torch.cuda.current_stream().synchronize()

    def ours():
        order = [("send", "recv"), ("recv", "send")][rank]
        for what in order:
            sends, recvs = ([Message(t, peer)], []) if what == "send" else ([], [Message(t, peer)])
            s, r = transport.exchange(sends, recvs, label=None)
            for w in s + r:
                w.wait()

    return native, ours


def _one_rank(t: torch.Tensor, transport: TorchDistTransport):
    def native():
        dist.all_reduce(t, async_op=True).wait()
        torch.cuda.current_stream().synchronize()

    def ours():
        _DistWork(dist.all_reduce(t, async_op=True), transport, 0).wait()

    return native, ours


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    local = int(os.environ.get("LOCAL_RANK", 0))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    rank, world = dist.get_rank(), dist.get_world_size()
    transport = TorchDistTransport()
    rows = []
    for size in SIZES:
        t = torch.zeros(size // 4, device="cuda")
        if world == 1:
            native, ours = _one_rank(t, transport)
        elif rank < 2:
            native, ours = _pingpong(t, rank, transport)
        else:
            native = ours = lambda: None  # noqa: E731 - ranks beyond 1 idle
        n_us, o_us = _median_us(native, a.iters, a.reps), _median_us(ours, a.iters, a.reps)
        half = 2 if world > 1 else 1  # a round trip is two messages
        rows.append({"bytes": size, "native_us": n_us / half, "ours_us": o_us / half})
        if rank == 0:
            print(
                f"{size:>9} B  native {n_us / half:8.2f} us  ours {o_us / half:8.2f} us  added {(o_us - n_us) / half:+8.2f} us"
            )
    if rank == 0 and a.json:
        props = torch.cuda.get_device_properties(local)
        meta = {
            "gpu": torch.cuda.get_device_name(local),
            "gpu_memory_bytes": props.total_memory,
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "nccl": ".".join(map(str, torch.cuda.nccl.version())),
            "world_size": world,
            "what": "ping-pong, half a round trip" if world > 1 else "one rank: an NCCL all-reduce's wait",
            "iters": a.iters,
            "reps": a.reps,
        }
        with open(a.json, "w") as f:
            json.dump({"machine": meta, "rows": rows}, f, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
