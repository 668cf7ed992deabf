"""How much of the all-reduce gap is ours, and how much is torch's point-to-point layer?

Three all-reduces of the same tensor on N local gloo processes, interleaved
call by call, each call timed on its own:

* ``native``: gloo's own ``dist.all_reduce`` (its ring runs inside one C++ call);
* ``handwritten``: the direct all-reduce (chapter 3) written straight on the
  process group's ``send``/``recv``, under twenty lines with no schedule, no
  executor and no checks: the floor for anything built on torch's
  point-to-point calls;
* ``ours``: ``mycollectives.all_reduce(..., algorithm="direct", check=False)``,
  the same messages through the schedule and the executor, with the
  transport's defaults.

For each repetition it records every call's wall time (the slowest rank) and
the CPU time of all ranks together (user + system, every thread), so the
ratios are paired: ``native / ours`` in the same repetition. Prints a summary
and writes JSON (``--json``) with the machine it ran on.

    python benchmarks/p2p_floor.py --nprocs 4 --size 16M --reps 40 --json out.json
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import time

import torch
import torch.distributed as dist

import mycollectives as mc
from mycollectives.bench.factors import parse_size
from mycollectives.bench.report import machine

VARIANTS = ("native", "handwritten", "ours")


def handwritten_direct(t: torch.Tensor, staging: torch.Tensor) -> None:
    """Direct all-reduce on the group's own send/recv: reduce-scatter by
    exchanging chunks with every peer, then all-gather the reduced chunk."""
    g, me, p = dist.group.WORLD, dist.get_rank(), dist.get_world_size()
    c = t.numel() // p  # the script takes sizes divisible by p
    chunk = [t[j * c : (j + 1) * c] for j in range(p)]
    peers = [(me + k) % p for k in range(1, p)]
    parts = [staging[i * c : (i + 1) * c] for i in range(p - 1)]
    recvs = [g.recv([parts[i]], q, 0) for i, q in enumerate(peers)]
    sends = [g.send([chunk[q]], q, 0) for q in peers]
    for i, w in enumerate(recvs):
        w.wait()
        chunk[me].add_(parts[i])
    for w in sends:
        w.wait()
    works = [g.recv([chunk[q]], q, 0) for q in peers] + [g.send([chunk[me]], q, 0) for q in peers]
    for w in works:
        w.wait()


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _worker(rank: int, nbytes: int, reps: int, out: str | None) -> None:
    p = dist.get_world_size()
    t = torch.empty(nbytes // 4)
    staging = torch.empty((p - 1) * (t.numel() // p))
    calls = {
        "native": lambda: dist.all_reduce(t),
        "handwritten": lambda: handwritten_direct(t, staging),
        "ours": lambda: mc.all_reduce(t, algorithm="direct", check=False),
    }
    for name, call in calls.items():  # correctness first, then one warm-up call
        t.fill_(rank + 1)
        call()
        if not torch.all(t == p * (p + 1) / 2):
            raise RuntimeError(f"rank {rank}: {name} all-reduce gave a wrong result")
        call()
    samples = {v: [] for v in VARIANTS}
    for rep in range(reps):
        order = VARIANTS[rep % 3 :] + VARIANTS[: rep % 3]
        for v in order:
            dist.barrier()
            c0, w0 = _cpu(), time.perf_counter()
            calls[v]()
            x = torch.tensor([time.perf_counter() - w0, _cpu() - c0], dtype=torch.float64)
            wall, cpu = x.clone(), x.clone()
            dist.all_reduce(wall, dist.ReduceOp.MAX)
            dist.all_reduce(cpu)
            samples[v].append((wall[0].item() * 1e3, cpu[1].item() * 1e3))
    if rank == 0:
        report(samples, p, nbytes, out)


def report(samples: dict, p: int, nbytes: int, out: str | None) -> None:
    nat = samples["native"]
    print(f"all-reduce of {nbytes} B on {p} gloo processes, {len(nat)} interleaved repetitions")
    for v in VARIANTS:
        wall = statistics.median(s[0] for s in samples[v])
        cpu = statistics.median(s[1] for s in samples[v])
        rw = statistics.median(n[0] / s[0] for s, n in zip(samples[v], nat))
        rc = statistics.median(n[1] / s[1] for s, n in zip(samples[v], nat))
        print(f"{v:>12s}: wall {wall:8.2f} ms, CPU of all ranks {cpu:8.2f} ms; "
              f"native / this, paired: wall {rw:.2f}, CPU {rc:.2f}")  # fmt: skip
    if out:
        meta = machine("gloo", p) | {"command": " ".join(sys.argv), "bytes": nbytes}
        rows = {
            v: {"wall_ms": [s[0] for s in samples[v]], "cpu_ms": [s[1] for s in samples[v]]} for v in VARIANTS
        }
        with open(out, "w") as f:
            json.dump({"machine": meta, "samples": rows}, f, indent=1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nprocs", type=int, default=4)
    ap.add_argument("--size", default="16M", help="bytes of float32 per rank, e.g. 16M")
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    nbytes = parse_size(args.size)
    if nbytes % (4 * args.nprocs):
        raise SystemExit(f"--size must be a multiple of 4 * nprocs = {4 * args.nprocs} bytes")
    try:
        mc.run_gloo(_worker, args.nprocs, nbytes, args.reps, args.json, timeout=3600)
    except RuntimeError as e:
        raise SystemExit(str(e)) from None


if __name__ == "__main__":
    main()
