"""A plain torch.distributed training loop with one fault injected, PyTorch's Flight Recorder on (chapter 6).

::

    TORCH_FR_BUFFER_SIZE=2000 torchrun --nproc-per-node 4 torchfr_faults.py --fault skip --out DIR
    python -m mycollectives.doctor DIR
    torchfrtrace DIR -p nccl_trace_rank_

The job calls nothing of ``mycollectives``: it is what an engineer's job
looks like. Each step makes three all-reduces and a broadcast (seq 4s+1 to
4s+4 at step s, as PyTorch numbers them from 1); rank ``--bad`` (2)
misbehaves at step ``--step`` (3). Each rank writes its recorder's dump (pickle, as NCCL's
watchdog writes it, or JSON with ``--json``) to ``DIR/nccl_trace_rank_{R}``
when a collective fails, when it ends, on ``SIGTERM`` (which torchrun sends
the other ranks when one fails) and when ``--deadline`` passes (a watchdog
thread, for a rank stuck in native code). A rank that dies (``die``) writes
nothing.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from datetime import timedelta

import torch
import torch.distributed as dist

FAULTS = "none skip extra order size dtype collective root op straggler hang die crash slow".split()
BAD = [2]  # the rank that misbehaves (--bad)
_once = threading.Lock()


def dump(out: str, rank: int, as_json: bool) -> None:
    """This rank's Flight Recorder, written once (the first of finally, SIGTERM or the deadline)."""
    with _once:  # a second caller waits until the first has written the file
        if getattr(dump, "done", False):
            return
        dump.done = True
        c10d = torch._C._distributed_c10d
        data = c10d._dump_fr_trace_json() if as_json else c10d._dump_fr_trace()
        path = os.path.join(out, f"nccl_trace_{'json_' if as_json else ''}rank_{rank}")
        with open(path + ".tmp", "wb") as f:
            f.write(data if isinstance(data, bytes) else data.encode())
        os.replace(path + ".tmp", path)


def step(s: int, rank: int, fault: str, at: int) -> None:
    """One step: all_reduce 4096, all_reduce 1024, all_reduce 256, broadcast 512 from rank 0."""
    bad = rank == BAD[0] and s == at
    calls = [
        ("all_reduce", 4096, torch.float32, {}),
        ("all_reduce", 1024, torch.float32, {}),
        ("all_reduce", 256, torch.float32, {}),
        ("broadcast", 512, torch.float32, {"src": 0}),
    ]
    if bad:
        calls = inject(calls, fault, rank)
    if fault == "slow" and rank == BAD[0]:
        time.sleep(0.1)
    for fn, n, dtype, kw in calls:
        if fn == "sleep":
            time.sleep(n)
            continue
        getattr(dist, fn)(torch.ones(n, dtype=dtype), **kw)


def inject(calls: list, fault: str, rank: int) -> list:
    """Rank ``BAD``'s calls at the faulty step."""
    ar, ar2, ar3, bc = calls
    if fault == "skip":
        return [ar, ar3, bc]
    if fault == "extra":
        return [ar, ar2, ar2, ar3, bc]
    if fault == "order":
        return [ar2, ar, ar3, bc]
    if fault in ("size", "dtype"):
        return [
            ar,
            ("all_reduce", 1025, torch.float32, {}) if fault == "size" else ar2[:2] + (torch.float64, {}),
            ar3,
            bc,
        ]
    if fault == "collective":
        return [ar, ("broadcast", 1024, torch.float32, {"src": 0}), ar3, bc]
    if fault == "root":
        return [ar, ar2, ar3, ("broadcast", 512, torch.float32, {"src": 1})]
    if fault == "op":
        return [ar, ("all_reduce", 1024, torch.float32, {"op": dist.ReduceOp.MAX}), ar3, bc]
    if fault in ("straggler", "hang"):
        return [ar, ("sleep", 30 if fault == "straggler" else 3600, None, {}), ar2, ar3, bc]
    if fault == "die":
        os._exit(1)
    if fault == "crash":
        raise RuntimeError("injected error")
    return calls


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fault", choices=FAULTS, default="none")
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--step", type=int, default=3, help="the step at which rank 2 misbehaves")
    p.add_argument("--timeout", type=float, default=5.0, help="the collectives' timeout, seconds")
    p.add_argument("--deadline", type=float, default=40.0, help="dump and exit after this many seconds")
    p.add_argument("--json", action="store_true", help="write the JSON dump instead of the pickle")
    p.add_argument("--bad", type=int, default=2, help="the rank that misbehaves")
    args = p.parse_args()
    BAD[0] = args.bad
    os.makedirs(args.out, exist_ok=True)
    # SIGTERM is taken by a thread, not the main one: the main thread may be blocked in native code
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.timeout))
    rank = dist.get_rank()

    def bail(code: int) -> None:
        dump(args.out, rank, args.json)
        os._exit(code)

    def on_term() -> None:
        signal.sigwait({signal.SIGTERM})
        bail(143)

    threading.Thread(target=on_term, daemon=True).start()
    timer = threading.Timer(args.deadline, bail, (124,))
    timer.daemon = True
    timer.start()
    try:
        for s in range(args.steps):
            step(s, rank, args.fault, args.step)
        dist.barrier()
    finally:
        dump(args.out, rank, args.json)
    dist.destroy_process_group()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
