"""How fast the simulator is: ring all-reduce at 1024 and 4096 ranks (issue 3's scale figures).

Not a test: it prints wall-clock times on the machine at hand. Targets on a
2-core machine: 1024 ranks in at most 1 s, 4096 in at most 10 s.

    python benchmarks/sim_scale.py            # equal chunks (the pattern cache hits)
    python benchmarks/sim_scale.py --uneven   # sizes not divisible by p, too
"""

from __future__ import annotations

import argparse
import time

from mycollectives.sim import simulate
from mycollectives.topology import cluster

TARGET_S = {1024: 1.0, 4096: 10.0}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--uneven", action="store_true", help="also time a size that does not divide evenly")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    sizes = [1 << 30] + ([(1 << 30) + 4 * 1000] if args.uneven else [])
    print(f"{'ranks':>6} {'size (B)':>12} {'rounds':>7} {'best (s)':>9} {'target':>7}  simulated")
    for ranks, target in TARGET_S.items():
        topo = cluster("dgx_h100", nodes=ranks // 8)
        for nbytes in sizes:
            best, r = float("inf"), None
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                r = simulate("all_reduce", "ring", nbytes, topo)
                best = min(best, time.perf_counter() - t0)
            ok = "ok" if best <= target else "SLOW"
            print(f"{ranks:6d} {nbytes:12d} {len(r.round_time):7d} {best:9.3f} {target:6.1f}s {ok}  {r}")


if __name__ == "__main__":
    main()
