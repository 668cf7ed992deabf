"""One rank of tests/test_doctor_native.py's job (run as a script, one process per rank).

``argv``: rank, world size, store file, the rank that passes one element more. Every rank
all-reduces twice, then all-gathers with ``check=False``: the odd rank's message is larger than
its receivers posted for, and gloo ends them by ``abort()`` in native code. The survivor fails
in the next all-reduce (its peer is gone).
"""

from __future__ import annotations

import sys

import torch
import torch.distributed as dist

import mycollectives as mc


def main() -> None:
    rank, world, store, odd = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    for _ in range(2):
        mc.all_reduce(torch.ones(256))
    n = 256 + (rank == odd)
    out = torch.empty(world * n)
    mc.all_gather_into_tensor(out, torch.ones(n), check=False)
    mc.all_reduce(torch.ones(256))


if __name__ == "__main__":
    main()
