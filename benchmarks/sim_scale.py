"""How fast the simulators are at scale (issue 20's targets), on the machine at hand.

Not a test: it prints wall-clock times. Targets on a 2-core machine:

* ring all-reduce, the package's round-by-round simulator and NCCL's ring with
  its channels: 1024 ranks within 1 s, 4096 within 10 s;
* every NCCL algorithm (with its channels) at 32,768 ranks (4096 DGX H100
  nodes, or 32,768 one-GPU nodes for PAT) within 60 s, building the
  cluster included.

    python benchmarks/sim_scale.py            # equal chunks (the pattern cache hits)
    python benchmarks/sim_scale.py --uneven   # sizes not divisible by p, too
"""

from __future__ import annotations

import argparse
import time

from mycollectives.sim import simulate, simulate_nccl
from mycollectives.topology import cluster

RING_TARGET_S = {1024: 1.0, 4096: 10.0}
NCCL_TARGET_S = 60.0
GIB = 1 << 30


def best_of(repeat: int, fn):
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def rings(repeat: int, uneven: bool) -> None:
    sizes = [GIB] + ([GIB + 4 * 1000] if uneven else [])
    print(f"{'ranks':>6} {'simulator':>22} {'size (B)':>12} {'best (s)':>9} {'target':>7}  result")
    for ranks, target in RING_TARGET_S.items():
        topo = cluster("dgx_h100", nodes=ranks // 8)
        for nbytes in sizes:
            for name, fn in (
                ("package ring (rounds)", lambda n=nbytes, t=topo: simulate("all_reduce", "ring", n, t)),
                ("NCCL Ring (channels)", lambda n=nbytes, t=topo: simulate_nccl("all_reduce", "Ring", n, t)),
            ):
                t, r = best_of(repeat, fn)
                ok = "ok" if t <= target else "SLOW"
                print(
                    f"{ranks:6d} {name:>22} {nbytes:12d} {t:9.3f} {target:6.1f}s {ok}  busbw {r.busbw:.1f} GB/s"
                )


def nccl_at_32k() -> None:
    cases = [
        ("all_reduce", "Ring", dict()),
        ("all_reduce", "Tree", dict()),
        ("all_reduce", "NVLSTree", dict()),
        ("all_reduce", "NVLS", dict(sharp=True)),
        ("all_reduce", "CollNetChain", dict(sharp=True)),
        ("all_reduce", "CollNetDirect", dict(sharp=True)),
        ("all_gather", "Ring", dict()),
        ("reduce_scatter", "Ring", dict()),
        ("all_gather", "PAT", dict(gpus_per_node=1)),
        ("reduce_scatter", "PAT", dict(gpus_per_node=1)),
    ]
    print(
        f"\n{'collective':>14} {'algorithm':>13} {'ranks':>6} {'build (s)':>9} {'simulate (s)':>12} {'target':>7}"
    )
    for c, a, opts in cases:
        nodes = 32768 if opts.get("gpus_per_node") == 1 else 4096
        t0 = time.perf_counter()
        topo = cluster("dgx_h100", nodes, **opts)
        build = time.perf_counter() - t0
        t0 = time.perf_counter()
        r = simulate_nccl(c, a, GIB, topo)
        sim = time.perf_counter() - t0
        ok = "ok" if build + sim <= NCCL_TARGET_S else "SLOW"
        print(f"{c:>14} {a:>13} {r.world_size:6d} {build:9.2f} {sim:12.2f} {NCCL_TARGET_S:6.0f}s {ok}  "
              f"busbw {r.busbw:.1f} GB/s")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--uneven", action="store_true", help="also time a size that does not divide evenly")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    rings(args.repeat, args.uneven)
    nccl_at_32k()


if __name__ == "__main__":
    main()
