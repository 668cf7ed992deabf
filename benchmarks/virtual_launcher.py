"""Wall time of the launcher (``python -m mycollectives.virtual``) on the machine at hand.

Not a test: it prints wall-clock seconds. The launcher runs
``virtual_launcher_ddp.py`` (DDP of a three-layer MLP of width 256, AdamW,
``--steps`` steps) unmodified on DGX H100 nodes of 8 ranks each (fewer ranks:
one node with that many GPUs), in this process, and the table gives the wall
time and the process's CPU time beside the run's virtual time (rank 0's, from
the launcher's table), with the load average before and after.
A first launch of 2 ranks, timed apart, pays the process's imports. Target
(issue 38): 16 ranks, 10 steps, within 60 s of wall time.

    python benchmarks/virtual_launcher.py                      # 8, 16, 64, 256 ranks, 10 steps
    python benchmarks/virtual_launcher.py --ranks 16 --steps 10
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import time
from pathlib import Path

from mycollectives.virtual import launch

SCRIPT = Path(__file__).with_name("virtual_launcher_ddp.py")
TARGET_S = {(16, 10): 60.0}


def one(ranks: int, steps: int) -> dict:
    nodes, per_node = (ranks // 8, 8) if ranks >= 8 else (1, ranks)
    argv = ["--nnodes", str(nodes), "--nproc-per-node", str(per_node), str(SCRIPT), "--steps", str(steps)]
    table = io.StringIO()
    t0, c0 = time.perf_counter(), time.process_time()
    with contextlib.redirect_stderr(table):
        code = launch.main(argv)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    if code:
        raise SystemExit(f"the launcher failed on {ranks} ranks:\n{table.getvalue()}")
    virtual_ms = float(table.getvalue().splitlines()[2].split()[1])  # rank 0's row: its virtual ms
    return {"ranks": ranks, "steps": steps, "wall_s": wall, "cpu_s": cpu, "virtual_ms": virtual_ms}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, nargs="+", default=[8, 16, 64, 256])
    ap.add_argument("--steps", type=int, default=10)
    args = ap.parse_args()
    t0 = time.perf_counter()
    one(2, 1)  # the process's first launch imports torch.distributed, DDP and friends: timed apart
    print(f"warm-up (2 ranks, 1 step, imports included): {time.perf_counter() - t0:.1f} s wall")
    print(f"load average at start: {' '.join(f'{x:.1f}' for x in os.getloadavg())}; {os.cpu_count()} cores")
    print(f"{'ranks':>6} {'steps':>6} {'wall s':>8} {'CPU s':>7} {'virtual ms (dgx_h100)':>22}  target")
    for ranks in args.ranks:
        r = one(ranks, args.steps)
        target = TARGET_S.get((ranks, args.steps))
        verdict = "" if target is None else f"<= {target:g} s: {'met' if r['wall_s'] <= target else 'MISSED'}"
        print(
            f"{ranks:>6} {args.steps:>6} {r['wall_s']:>8.1f} {r['cpu_s']:>7.1f} {r['virtual_ms']:>22.3f}  {verdict}",
            flush=True,
        )
    print(f"load average at end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
