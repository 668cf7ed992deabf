"""The argument check at scale: one all-reduce on thousands of virtual ranks, wall time and peak memory.

Not a test: it prints what it measured on the machine at hand (CPU seconds
beside wall seconds: a run resumes one rank at a time, so on a quiet machine
its wall time is about its CPU time; on a loaded one, more). Each row is a
fresh process (so its peak resident memory is this run's alone) that runs
one ``size``-byte all-reduce (``auto``, real float32 data) on every rank of a
DGX H100 cluster, with the package's argument check on (``check=True``, the
default) and off. Target (issue 42): 1,024 ranks with the check on within
60 s and 4 GiB.

    python benchmarks/virtual_check_scale.py                    # 256, 1024, 4096 ranks, check on and off
    python benchmarks/virtual_check_scale.py --ranks 1024 --check on
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

TARGET = {1024: (60.0, 4.0)}  # ranks: (wall s, GiB), with the check on


def child(ranks: int, size: int, check: bool) -> None:
    """One run, in this process; prints its row as JSON."""
    import torch

    import mycollectives as mc
    from mycollectives import virtual

    def step(rank: int) -> float:
        x = torch.full((size // 4,), float(rank))
        mc.all_reduce(x, check=check)
        return float(x[0])

    t0 = time.perf_counter()
    run = virtual.run(step, "dgx_h100", ranks // 8, timeout=24 * 3600.0)  # a loaded machine is slow
    wall = time.perf_counter() - t0
    right = ranks * (ranks - 1) / 2
    use = resource.getrusage(resource.RUSAGE_SELF)
    peak, cpu = use.ru_maxrss / 2**20, use.ru_utime + use.ru_stime  # KiB -> GiB; s
    row = {"ranks": ranks, "check": check, "wall_s": wall, "cpu_s": cpu, "peak_gib": peak}
    row["virtual_s"] = run.elapsed
    row["correct"] = all(r == right for r in run.results)
    print(json.dumps(row))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, nargs="+", default=[256, 1024, 4096])
    ap.add_argument("--size", type=int, default=1 << 20, help="bytes per all-reduce (default 1 MiB)")
    ap.add_argument("--check", choices=("on", "off", "both"), default="both")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    checks = {"on": [True], "off": [False], "both": [True, False]}[args.check]
    if args.child:
        return child(args.ranks[0], args.size, checks[0])
    for r in args.ranks:
        if r < 8 or r % 8:
            ap.error(f"--ranks {r}: give a multiple of 8 (whole DGX nodes)")
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(
        f"{'ranks':>6} {'check':>5} {'wall (s)':>9} {'CPU (s)':>8} {'peak (GiB)':>10} {'virtual (ms)':>12} right  target"
    )
    for ranks in args.ranks:
        for check in checks:
            cmd = [sys.executable, __file__, "--child", "--ranks", str(ranks), "--size", str(args.size)]
            out = subprocess.run([*cmd, "--check", "on" if check else "off"], capture_output=True, text=True)
            if out.returncode:
                print(f"{ranks:>6} {check!s:>5} failed: {out.stderr.strip().splitlines()[-1:]}")
                continue
            row = json.loads(out.stdout.strip().splitlines()[-1])
            wall_t, mem_t = TARGET.get(ranks, (None, None)) if check else (None, None)
            target = f"<= {wall_t:g} s, <= {mem_t:g} GiB" if wall_t else ""
            print(
                f"{ranks:>6} {check!s:>5} {row['wall_s']:9.1f} {row['cpu_s']:8.1f} {row['peak_gib']:10.2f} "
                f"{1e3 * row['virtual_s']:12.3f} {row['correct']!s:>5}  {target}"
            )


if __name__ == "__main__":
    main()
