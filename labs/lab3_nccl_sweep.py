"""Lab 3: NCCL_ALGO x NCCL_PROTO sweep of the native all-reduce on this node's GPUs.

Runs ``python -m mycollectives.bench --algorithm native`` under ``torchrun``
once per (algorithm, protocol) pair, each into its own JSON file, and prints
the busbw of each pair at each size. Needs at least one GPU (two for a real
collective); prints why and exits 0 otherwise, so the lab runs on CPU too.

    python labs/lab3_nccl_sweep.py --out labs/results -b 1M -e 256M
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys

ALGOS = ("Ring", "Tree", "CollnetDirect", "CollnetChain", "NVLS")
PROTOS = ("LL", "LL128", "Simple")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="labs/results")
    ap.add_argument("-b", default="1M")
    ap.add_argument("-e", default="256M")
    ap.add_argument("--collective", default="all_reduce")
    args = ap.parse_args()
    import torch

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if gpus < 1:
        print("skipped: no CUDA GPU here, so there is no NCCL to sweep (run this on a GPU node)")
        return 0
    os.makedirs(args.out, exist_ok=True)
    table = {}
    for algo, proto in itertools.product(ALGOS, PROTOS):
        path = os.path.join(args.out, f"{args.collective}_{algo}_{proto}.json")
        env = dict(os.environ, NCCL_ALGO=algo, NCCL_PROTO=proto)
        cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={gpus}",
               "-m", "mycollectives.bench", "-C", args.collective, "-b", args.b, "-e", args.e,
               "--algorithm", "native", "--progress", "0", "--json", path]  # fmt: skip
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if done.returncode != 0:  # NCCL refuses pairs this node cannot run (NVLS without NVSwitch, ...)
            print(f"{algo:>13s} {proto:>6s}: not available ({done.stderr.strip().splitlines()[-1:]})")
            continue
        with open(path) as f:
            table[(algo, proto)] = {r["size"]: r["busbw"] for r in json.load(f)["results"]}
    for (algo, proto), row in table.items():
        print(
            f"{algo:>13s} {proto:>6s}: " + "  ".join(f"{s >> 10}K {bw:.1f}" for s, bw in sorted(row.items()))
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
