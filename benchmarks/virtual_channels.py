"""Channels on rails: the virtual cluster's ring all-reduce busbw on DGX H100 nodes, one channel against NCCL's count.

Not a test: it prints virtual time (the modelled cluster's clock, not this
machine's) beside the published nccl-tests rows of those clusters
(``mycollectives/sim/published.json``, asserted set). Every rank is a thread
with real float32 data, so the size is bounded by this machine's memory
(``ranks x size``); ``--data-free`` runs meta tensors instead (needs the
virtual cluster's data-free mode, ``virtual.run(..., data=False)``), for
nccl-tests' sizes of GiBs.

    python benchmarks/virtual_channels.py                       # 1, 2, 4 nodes at 64 MiB
    python benchmarks/virtual_channels.py --nodes 2 --size 268435456
    python benchmarks/virtual_channels.py --nodes 2 4 --size 17179869184 --data-free
"""

from __future__ import annotations

import argparse
import time

import torch

import mycollectives as mc
from mycollectives import virtual
from mycollectives.collectives import busbw_factor
from mycollectives.sim.validate import points


def step(rank: int, count: int, channels: int | None, meta: bool) -> float:
    x = torch.empty(count, device="meta") if meta else torch.ones(count)
    kw = {} if channels is None else {"channels": channels}
    t0 = virtual.clock()
    mc.all_reduce(x, algorithm="ring", check=False, **kw)
    return virtual.clock() - t0


def published(nodes: int) -> str:
    rows = [p for p in points() if p.set == "asserted" and p.collective == "all_reduce" and p.nodes == nodes
            and p.model is not None and p.model["node"] == "dgx_h100"]  # fmt: skip
    return ", ".join(f"{p.busbw:g} ({p.id}, {p.model['size'] / 2**30:g} GiB)" for p in rows) or "none"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--size", type=int, default=64 << 20, help="bytes per all-reduce (default 64 MiB)")
    ap.add_argument("--data-free", action="store_true", help="meta tensors, virtual.run(data=False)")
    args = ap.parse_args()
    extra = {"data": False} if args.data_free else {}
    for nodes in args.nodes:
        p = 8 * nodes
        for channels in (1, None):
            t0 = time.perf_counter()
            run = virtual.run(step, "dgx_h100", nodes, (args.size // 4, channels, args.data_free), **extra)
            busbw = args.size / max(run.results) * busbw_factor("all_reduce", p) / 1e9
            print(f"virtual time on dgx_h100 x{nodes}: ring all_reduce of {args.size} B on "
                  f"{'NCCL' + chr(39) + 's count of' if channels is None else 1} channels: busbw {busbw:6.1f} GB/s "
                  f"(wall {time.perf_counter() - t0:.1f} s)", flush=True)  # fmt: skip
        print(f"  published busbw, GB/s: {published(nodes)}")


if __name__ == "__main__":
    main()
