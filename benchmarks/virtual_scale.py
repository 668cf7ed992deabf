"""How fast the virtual cluster runs (issue 28's targets), on the machine at hand.

Not a test: it prints wall-clock times. Every rank of a DGX H100 cluster runs
``calls`` all-reduces of ``size`` bytes (the package's ``auto`` choice, argument
check on, real float32 data), one thread per rank, resumed one at a time in
virtual time. Targets on a 2-core machine: 16 ranks x 50 all-reduces of 1 MiB
within 60 s; 64 ranks (a lab's multi-node lesson) in about a minute.

    python benchmarks/virtual_scale.py                 # ranks 8..64, 10 and 50 calls of 1 MiB
    python benchmarks/virtual_scale.py --ranks 16 --calls 50 --algorithm ring
"""

from __future__ import annotations

import argparse
import time

import torch

import mycollectives as mc
from mycollectives import virtual

TARGET_S = {(16, 50): 60.0}


def step(rank: int, calls: int, count: int, algorithm: str, check: bool) -> float:
    x = torch.ones(count)
    for _ in range(calls):
        mc.all_reduce(x, algorithm=algorithm, check=check)
    return virtual.clock()


def one(ranks: int, calls: int, size: int, algorithm: str, check: bool) -> dict:
    nodes = max(1, ranks // 8)
    t0 = time.perf_counter()
    run = virtual.run(
        step, "dgx_h100", nodes, (calls, size // 4, algorithm, check), world_size=ranks if ranks < 8 else None
    )
    wall = time.perf_counter() - t0
    return {"ranks": ranks, "calls": calls, "wall_s": wall, "virtual_s": run.elapsed, **run.stats}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, nargs="+", default=[8, 16, 32, 64])
    ap.add_argument("--calls", type=int, nargs="+", default=[10, 50])
    ap.add_argument("--size", type=int, default=1 << 20, help="bytes per all-reduce (default 1 MiB)")
    ap.add_argument("--algorithm", default="auto")
    ap.add_argument("--no-check", action="store_true", help="skip the argument check before each call")
    args = ap.parse_args()
    for r in args.ranks:
        if r < 1 or (r > 8 and r % 8):
            ap.error(f"--ranks {r}: give 1..8, or a multiple of 8 (whole DGX nodes)")
    print(
        f"{'ranks':>5} {'calls':>5} {'flows':>7} {'switches':>8} {'wall (s)':>9} {'virtual (ms)':>12}  target"
    )
    for ranks in args.ranks:
        for calls in args.calls:
            row = one(ranks, calls, args.size, args.algorithm, not args.no_check)
            target = TARGET_S.get((ranks, calls))
            verdict = (
                "" if target is None else f"{target:g} s: {'ok' if row['wall_s'] <= target else 'MISSED'}"
            )
            print(
                f"{ranks:5d} {calls:5d} {row['flows']:7d} {row['switches']:8d} {row['wall_s']:9.2f} "
                f"{row['virtual_s'] * 1e3:12.3f}  {verdict}",
                flush=True,
            )


if __name__ == "__main__":
    main()
