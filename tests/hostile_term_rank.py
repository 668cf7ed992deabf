"""One rank of tests/test_hostile_term.py's jobs (run as a script, one process per rank).

``argv``: rank, world size, store file, case. Every rank joins a gloo group and sets up a
shared-memory transport (the package's SIGTERM clean-up is installed); rank 0 then
broadcasts a message that rank 1 does not receive, so that a file of rank 0's waits in
``/dev/shm``, and prints ``ready`` with the paths of its files. Then, per case:

* ``rendezvous``: rank 0 waits in a symmetric-memory rendezvous that rank 1 joins only
  after ``JOIN_AFTER_S`` (or never, if rank 0 is gone by then: it is told so);
* ``start``: rank 0 constructs a second shared-memory transport and waits in its set-up,
  which rank 1 joins only after ``JOIN_AFTER_S``.

Rank 0 prints ``waiting`` before it blocks; the test sends it SIGTERM then. A rank that
gets the package's error prints it and exits with status 3.
"""

from __future__ import annotations

import os
import sys
import time

import torch
import torch.distributed as dist

import mycollectives as mc
from mycollectives import symmetric
from mycollectives.transport.shm import ShmTransport

JOIN_AFTER_S = 8.0
TIMEOUT_S = 60.0


def main() -> None:
    rank, world, store, case = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    t = ShmTransport(None, timeout=TIMEOUT_S)  # the package's SIGTERM clean-up is installed
    t.bells  # noqa: B018 - its set-up done on both ranks
    if rank == 0:
        x = torch.ones(1 << 16)
        mc.broadcast(x, 0, group=t, async_op=True, check=False).wait()  # its file waits for rank 1
        print("ready", *sorted(f for f in t.paths if os.path.exists(f)), flush=True)
        print("waiting", flush=True)
    else:
        time.sleep(JOIN_AFTER_S)
    t0 = time.monotonic()
    try:
        if case == "rendezvous":
            symmetric.rendezvous(symmetric.empty(1 << 10), t, timeout=TIMEOUT_S)
        else:
            ShmTransport(None, timeout=TIMEOUT_S, setup_timeout=TIMEOUT_S).bells  # noqa: B018
    except mc.CollectiveError as e:
        print(f"error after {time.monotonic() - t0:.1f} s: {type(e).__name__}: {e}", flush=True)
        sys.exit(3)
    print(f"done after {time.monotonic() - t0:.1f} s", flush=True)


if __name__ == "__main__":
    main()
