"""nccl-tests' all_reduce sweep on virtual DGX H100 clusters, beside the published rows (issue 37).

Not a test: it prints, for 1 and 2 nodes of ``dgx_h100``, the virtual
cluster's all_reduce busbw from 8 B to 8 GiB (data-free, what NCCL 2.30.7
would run at each size: ``python -m mycollectives.bench --virtual``'s sweep),
the wall time of each sweep, and then every published all_reduce row of the
dataset (``mycollectives/sim/published.json``) on those clusters with the
virtual cluster's busbw at the row's size. Rows that forced an algorithm
(``NCCL_ALGO``) are shown with NCCL's default beside them, marked.

    python benchmarks/virtual_nccl_tests.py
"""

from __future__ import annotations

import json
import time
from argparse import Namespace
from pathlib import Path

import mycollectives
from mycollectives import virtual
from mycollectives.bench.factors import bandwidths, sizes
from mycollectives.bench.virtual import results, sweep

DATA = Path(mycollectives.__file__).parent / "sim" / "published.json"


def busbw_sweep(nodes: int, sweep_sizes: list[int]) -> tuple[dict[int, float], dict[int, str], float]:
    """busbw (GB/s) and NCCL's choice per size, and the sweep's wall seconds."""
    args = Namespace(world=8 * nodes, datatype="float", op="sum", root=0, iters=1, warmup_iters=0,
                     arg_check=0, check=0, data=0)  # fmt: skip
    t0 = time.perf_counter()
    run = virtual.run(sweep, "dgx_h100", nodes, ("all_reduce", sweep_sizes, ["native"], args), data=False)
    wall = time.perf_counter() - t0
    rows = results(run.results, "all_reduce", args)
    chosen = {c.nbytes: f"{c.choice.algorithm}/{c.choice.protocol}" for c in run.calls}
    return {r.size: r.busbw for r in rows}, chosen, wall


def _one_call(rank: int, n: int):
    import torch

    import mycollectives as mc

    x = torch.empty(n // 4, device="meta")
    mc.all_reduce(x, check=False)  # NCCL's choice, as in the sweep
    mc.barrier(check=False)
    t0 = virtual.clock()
    mc.all_reduce(x, check=False)
    return virtual.clock() - t0


def published_rows() -> list[dict]:
    data = json.loads(DATA.read_text())
    rows = data["rows"] if isinstance(data, dict) else data
    return [
        r for r in rows
        if r["collective"] == "all_reduce" and r.get("model") and r["model"]["node"] == "dgx_h100"
        and r["model"]["nodes"] in (1, 2)
    ]  # fmt: skip


def main() -> None:
    sweep_sizes = sizes(8, 8 << 30, 2)
    table = {}
    for nodes in (1, 2):
        table[nodes] = busbw_sweep(nodes, sweep_sizes)
        print(f"# dgx_h100 x{nodes}: sweep of {len(sweep_sizes)} sizes in {table[nodes][2]:.1f} s wall")
    print("# all_reduce busbw, GB/s, virtual time on dgx_h100 (modelled), NCCL 2.30.7's choice")
    print(f"{'size (B)':>12} {'1 node':>8} {'choice':>16} {'2 nodes':>8} {'choice':>16}")
    for n in sweep_sizes:
        print(
            f"{n:12d} {table[1][0][n]:8.2f} {table[1][1][n]:>16} {table[2][0][n]:8.2f} {table[2][1][n]:>16}"
        )
    print("\n# published rows (dataset) beside the virtual cluster at the row's size")
    for r in published_rows():
        m = r["model"]
        world = m.get("gpus") or 8 * m["nodes"]
        run = virtual.run(_one_call, "dgx_h100", m["nodes"], (m["size"],), data=False,
                          world_size=world if world < 8 * m["nodes"] else None)  # fmt: skip
        bus = bandwidths("all_reduce", m["size"], max(run.results), world)[1]
        got = run.calls[-1].choice.algorithm
        forced = m.get("algorithm") and m["algorithm"] != got
        note = f"  (the row forced {m['algorithm']}; NCCL's default is {got})" if forced else ""
        print(f"{r['id']:28s} {r['set']:8s} {world:3d} GPUs {m['size']:>12d} B  published {r['busbw_gbs']:6.1f}"
              f"  virtual {bus:6.1f} [{got}] {100 * (bus / r['busbw_gbs'] - 1):+6.1f} %{note}")  # fmt: skip


if __name__ == "__main__":
    main()
