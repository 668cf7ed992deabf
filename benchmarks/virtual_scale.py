"""How fast, and in how much memory, the virtual cluster runs (issue 37's targets).

Not a test: it prints wall-clock seconds, CPU seconds (the process's, start-up
included: on a loaded machine the wall time is the one that drifts) and peak
resident memory of each case, run in a fresh process of its own (so each peak is its own). Every rank
of a DGX H100 cluster runs ``calls`` all-reduces of ``size`` bytes with
``algorithm="auto"`` (inside a virtual run: what NCCL would run), one thread
per rank, resumed one at a time in virtual time; with real float32 data, or
data-free (meta tensors, ``virtual.run(data=False)``), with the package's
argument check before each call or without it (``check=False``).

Targets (issue 37): 16 ranks x 50 all-reduces of 1 MiB within 5 s; 1024 ranks,
one all-reduce of 1 MiB, within 60 s and 8 GiB.

    python benchmarks/virtual_scale.py                         # the targets' cases
    python benchmarks/virtual_scale.py --case 64 10 1 --case 128 1 0
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import torch

import mycollectives as mc
from mycollectives import virtual

# (ranks, calls): (wall seconds, GiB)
TARGETS = {(16, 50): (5.0, None), (1024, 1): (60.0, 8.0)}
CASES = [(16, 50, True, True), (16, 50, True, False), (16, 50, False, False),
         (1024, 1, False, True), (1024, 1, False, False)]  # fmt: skip


def step(rank: int, calls: int, count: int, check: bool, data: bool) -> float:
    x = torch.ones(count) if data else torch.empty(count, device="meta")
    for _ in range(calls):
        mc.all_reduce(x, check=check)
    return virtual.clock()


def one(ranks: int, calls: int, size: int, check: bool, data: bool) -> dict:
    """One case in this process: wall seconds, virtual seconds, peak RSS."""
    nodes = max(1, ranks // 8)
    t0 = time.perf_counter()
    run = virtual.run(
        step, "dgx_h100", nodes, (calls, size // 4, check, data), world_size=ranks if ranks < 8 else None,
        data=data,
    )  # fmt: skip
    wall = time.perf_counter() - t0
    use = resource.getrusage(resource.RUSAGE_SELF)
    rss, cpu = use.ru_maxrss * 1024, use.ru_utime + use.ru_stime  # Linux: ru_maxrss in KiB
    choice = run.calls[0].choice if run.calls else None
    return {"ranks": ranks, "calls": calls, "check": check, "data": data, "wall_s": wall, "cpu_s": cpu,
            "virtual_s": run.elapsed, "peak_rss_gib": rss / 2**30, "flows": run.stats["flows"],
            "nccl": f"{choice.algorithm}/{choice.protocol}" if choice else "-"}  # fmt: skip


def in_child(ranks: int, calls: int, size: int, check: bool, data: bool) -> dict:
    cmd = [
        sys.executable,
        __file__,
        "--child",
        str(ranks),
        str(calls),
        str(size),
        str(int(check)),
        str(int(data)),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:  # killed (-9: out of memory, most likely) or failed: say so, go on
        why = (
            f"signal {-done.returncode}"
            if done.returncode < 0
            else (done.stderr.strip().splitlines() or ["?"])[-1]
        )
        return {"failed": why}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", nargs=3, type=int, action="append", metavar=("RANKS", "CALLS", "CHECK"),
                    help="a case (check 0/1), data-free and with data; default: the targets' cases")  # fmt: skip
    ap.add_argument("--size", type=int, default=1 << 20, help="bytes per all-reduce (default 1 MiB)")
    ap.add_argument("--child", nargs=5, type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        r, c, s, chk, data = args.child
        print(json.dumps(one(r, c, s, bool(chk), bool(data))))
        return
    cases = [(r, c, bool(k), d) for r, c, k in args.case for d in (True, False)] if args.case else CASES
    print(f"{'ranks':>5} {'calls':>5} {'check':>5} {'data':>5} {'NCCL runs':>15} {'flows':>7} "
          f"{'wall (s)':>9} {'CPU (s)':>8} {'peak RSS (GiB)':>14} {'virtual (ms)':>12}  target")  # fmt: skip
    for ranks, calls, check, data in cases:
        row = in_child(ranks, calls, args.size, check, data)
        if "failed" in row:
            print(
                f"{ranks:5d} {calls:5d} {check!s:>5} {data!s:>5}  did not finish: {row['failed']}", flush=True
            )
            continue
        target = TARGETS.get((ranks, calls))
        verdict = ""
        if target is not None:
            ok = row["wall_s"] <= target[0] and (target[1] is None or row["peak_rss_gib"] <= target[1])
            verdict = (
                f"{target[0]:g} s"
                + (f", {target[1]:g} GiB" if target[1] else "")
                + (": ok" if ok else ": MISSED")
            )
        print(f"{ranks:5d} {calls:5d} {check!s:>5} {data!s:>5} {row['nccl']:>15} {row['flows']:7d} "
              f"{row['wall_s']:9.2f} {row['cpu_s']:8.2f} {row['peak_rss_gib']:14.2f} {row['virtual_s'] * 1e3:12.3f}  {verdict}",
              flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
