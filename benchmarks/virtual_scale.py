"""How fast, and in how much memory, the virtual cluster runs (issue 37's targets).

Not a test: it prints wall-clock seconds, CPU seconds of the run (``CPU run``)
and of the whole process (``CPU all``, start-up included; on a loaded machine
the wall time is the one that drifts) and the peak resident memory of each
case, run in a fresh process of its own (so each peak is its own). Every rank
of a DGX H100 cluster runs ``calls`` all-reduces of ``size`` bytes with
``algorithm="auto"`` (inside a virtual run: what NCCL would run), one thread
per rank, resumed one at a time in virtual time; with real float32 data, or
data-free (meta tensors, ``virtual.run(data=False)``), with the package's
argument check before each call or without it (``check=False``).

Targets: 16 ranks x 50 all-reduces of 1 MiB within 5 s (issue 37); 1024 ranks,
one all-reduce of 1 MiB, within 60 s and 4 GiB (issue 42; issue 37 asked 8 GiB).

    python benchmarks/virtual_scale.py                         # the targets' cases
    python benchmarks/virtual_scale.py --case 64 10 1 --case 128 1 0
    python benchmarks/virtual_scale.py --against /tmp/old      # each case on another checkout first
    python benchmarks/virtual_scale.py --handovers             # what one hand-over between ranks costs

``--against DIR`` runs each case twice, side by side: first with the package of
another checkout (``DIR``, imported through ``PYTHONPATH``), then with this one,
so that both see the same load; the load average is printed with each row.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import torch

import mycollectives as mc
from mycollectives import virtual

# (ranks, calls): (wall seconds, GiB)
TARGETS = {(16, 50): (5.0, None), (1024, 1): (60.0, 4.0)}
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
    t0, c0 = time.perf_counter(), time.process_time()
    run = virtual.run(
        step, "dgx_h100", nodes, (calls, size // 4, check, data), world_size=ranks if ranks < 8 else None,
        data=data,
    )  # fmt: skip
    wall, cpu_run = time.perf_counter() - t0, time.process_time() - c0
    use = resource.getrusage(resource.RUSAGE_SELF)
    rss, cpu = use.ru_maxrss * 1024, use.ru_utime + use.ru_stime  # Linux: ru_maxrss in KiB
    choice = run.calls[0].choice if run.calls else None
    return {"ranks": ranks, "calls": calls, "check": check, "data": data, "wall_s": wall, "cpu_s": cpu, "cpu_run_s": cpu_run,
            "virtual_s": run.elapsed, "peak_rss_gib": rss / 2**30, "flows": run.stats["flows"],
            "nccl": f"{choice.algorithm}/{choice.protocol}" if choice else "-"}  # fmt: skip


def handovers(ranks: int = 16, rounds: int = 300) -> tuple[float, float]:
    """CPU and wall microseconds of one hand-over between rank threads (the scheduler's Python
    included): each rank moves its clock and lets the others catch up, ``rounds`` times."""
    from mycollectives.virtual import maestro

    def body(rank: int) -> None:
        me = maestro.current()
        for _ in range(rounds):
            me.clock += 1e-6
            me.maestro.sync(me)

    t0, c0 = time.perf_counter(), time.process_time()
    run = virtual.run(body, "dgx_h100", ranks // 8)
    n = run.stats["switches"]
    return (time.process_time() - c0) / n * 1e6, (time.perf_counter() - t0) / n * 1e6


def in_child(ranks: int, calls: int, size: int, check: bool, data: bool, tree: str | None = None) -> dict:
    """One case in a fresh process, with the package of checkout ``tree`` (None: this one)."""
    env = dict(os.environ, PYTHONPATH=tree) if tree else None
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
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode != 0:  # killed (-9: out of memory, most likely) or failed: say so, go on
        why = (
            f"signal {-done.returncode}"
            if done.returncode < 0
            else (done.stderr.strip().splitlines() or ["?"])[-1]
        )
        return {"failed": why}
    return json.loads(done.stdout.strip().splitlines()[-1])


def verdict(ranks: int, calls: int, row: dict) -> str:
    target = TARGETS.get((ranks, calls))
    if target is None:
        return ""
    ok = row["wall_s"] <= target[0] and (target[1] is None or row["peak_rss_gib"] <= target[1])
    return f"{target[0]:g} s" + (f", {target[1]:g} GiB" if target[1] else "") + (": ok" if ok else ": MISSED")


def show(label: str, case: tuple, row: dict) -> None:
    ranks, calls, check, data = case
    head = f"{label:>7} {ranks:5d} {calls:5d} {check!s:>5} {data!s:>5}"
    load = f"{os.getloadavg()[0]:5.1f}"
    if "failed" in row:
        print(f"{head}  did not finish: {row['failed']} (load {load})", flush=True)
        return
    print(f"{head} {row['nccl']:>15} {row['flows']:7d} {row['wall_s']:9.2f} {row['cpu_run_s']:8.2f} {row['cpu_s']:8.2f} "
          f"{row['peak_rss_gib']:14.2f} {row['virtual_s'] * 1e3:12.6f} {load}  {verdict(ranks, calls, row)}",
          flush=True)  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", nargs=3, type=int, action="append", metavar=("RANKS", "CALLS", "CHECK"),
                    help="a case (check 0/1), data-free and with data; default: the targets' cases")  # fmt: skip
    ap.add_argument("--size", type=int, default=1 << 20, help="bytes per all-reduce (default 1 MiB)")
    ap.add_argument("--against", metavar="DIR", help="first run each case on the checkout in DIR")
    ap.add_argument("--handovers", action="store_true", help="only: the cost of one hand-over between ranks")
    ap.add_argument("--child", nargs=5, type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.handovers:
        cpu, wall = handovers()
        print(f"one hand-over between 16 rank threads: {cpu:.1f} us CPU, {wall:.1f} us wall "
              f"(load {os.getloadavg()[0]:.1f})")  # fmt: skip
        return
    if args.child:
        r, c, s, chk, data = args.child
        print(json.dumps(one(r, c, s, bool(chk), bool(data))))
        return
    cases = [(r, c, bool(k), d) for r, c, k in args.case for d in (True, False)] if args.case else CASES
    trees = [("other", args.against), ("this", None)] if args.against else [("this", None)]
    print(f"{'code':>7} {'ranks':>5} {'calls':>5} {'check':>5} {'data':>5} {'NCCL runs':>15} {'flows':>7} "
          f"{'wall (s)':>9} {'CPU run':>8} {'CPU all':>8} {'peak RSS (GiB)':>14} {'virtual (ms)':>12} {'load':>5}  target")  # fmt: skip
    for case in cases:
        for label, tree in trees:
            show(label, case, in_child(*case[:2], args.size, *case[2:], tree))


if __name__ == "__main__":
    main()
