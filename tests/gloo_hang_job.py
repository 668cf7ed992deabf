"""A plain torch.distributed job on gloo that breaks at step 2 on rank 1: it hangs, dies or skips a call.

``python gloo_hang_job.py TIMEOUT MODE``: with MODE ``hang`` rank 1 is stuck in its own code, with
``die`` it exits at once (``os._exit``) and writes no dump, with ``skip`` it skips step 2's first
all-reduce and goes on: its next call, four times larger, meets the others' all-reduce.

It uses nothing of ``mycollectives`` but the dump handler chapter 6 tells a gloo job to install
(``mycollectives.book.fr_dump``, which a job may copy instead). Each step makes two all-reduces and
a broadcast (seq 3s+1 .. 3s+3 at step s, as PyTorch numbers them from 1). With ``hang`` and
``die`` rank 1 never reaches seq 7, and the others wait in it until the group's timeout or until
they lose rank 1; with ``skip`` rank 1's seq 7 is the others' seq 8.
"""

from __future__ import annotations

import os
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

from mycollectives.book.fr_dump import install_fr_dump


def main() -> None:
    dump = install_fr_dump()  # before init_process_group, as the chapter says
    dist.init_process_group("gloo", timeout=timedelta(seconds=float(sys.argv[1])))
    rank = dist.get_rank()
    try:
        for step in range(5):
            if rank == 1 and step == 2 and sys.argv[2] != "skip":
                if sys.argv[2] == "die":
                    os._exit(1)  # killed outright: no dump
                while True:  # stuck in its own code (a data loader, a bug): never reaches the call
                    time.sleep(1)
            grad = torch.ones(1024) * rank
            if not (rank == 1 and step == 2 and sys.argv[2] == "skip"):
                dist.all_reduce(grad[:256])
            dist.all_reduce(grad)
            dist.broadcast(grad[:64], src=0)
    finally:
        dump()


if __name__ == "__main__":
    main()
