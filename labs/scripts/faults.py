"""Chapter 6: a small training loop on mycollectives with one fault injected into one rank.

Every step all-reduces three gradient buckets (DDP's order: the last layer's
first), then all-gathers a small statistic; the pipeline pair (ranks 0 and
1) exchanges an activation with send/recv. ``--fault`` makes rank
``--rank`` misbehave at step ``--step``:

=========== ==================================================================
none        nothing: the run finishes
skip        skips the all-reduce of the middle bucket
order       all-reduces the buckets in the opposite order
size        passes a middle bucket one element longer
dtype       passes the middle bucket in float64
straggler   computes for three timeouts before the all-reduces (the others give up)
slow        computes 80 ms longer than the others at every step (nothing fails)
die         is killed (``os._exit``) before the all-reduces
crash       raises an exception in its own code before the all-reduces
deadlock    ranks 0 and 1 both receive before they send (the pipeline exchange)
extra       all-reduces the middle bucket twice (the mirror of skip)
send        sends its statistic to the next rank, which never receives it
last        skips the all-gather and exits normally (use with the run's last step)
=========== ==================================================================

Run it with torchrun (gloo on CPUs, NCCL on GPUs, the same script)::

    MYCOLLECTIVES_TIMEOUT=5 torchrun --nproc-per-node 4 labs/scripts/faults.py \\
        --fault skip --dump-dir /tmp/flight
    python -m mycollectives.doctor /tmp/flight

``--dump-dir`` sets ``MYCOLLECTIVES_FLIGHT_DIR`` for every rank. A fault
makes the job fail (a rank raises, torchrun stops the others); rank 0 writes
``--out`` only when the run finishes.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

FAULTS = ("none", "skip", "order", "size", "dtype", "straggler", "slow", "die", "crash", "deadlock")
FAULTS += ("extra", "send", "last")  # faults chapter 6 does not list; tests/test_faults.py runs them
BUCKETS = (4096, 1024, 256)  # elements of the three gradient buckets


def main() -> None:
    p = _parser()
    args = p.parse_args()
    if args.dump_dir is not None:  # before the package is imported: every rank writes there
        os.environ["MYCOLLECTIVES_FLIGHT_DIR"] = str(args.dump_dir)
    import torch

    import mycollectives as mc
    from labs.scripts.common import log, save, setup, teardown

    env = setup()
    rank, bad, timeout = env.rank, args.rank, float(os.environ.get("MYCOLLECTIVES_TIMEOUT", "300"))
    for step in range(args.steps):
        fault = args.fault if step == args.step else "none"
        me = rank == bad
        if args.fault == "slow" and me:
            time.sleep(0.08)
        if me and fault == "straggler":
            time.sleep(3 * timeout)
        if me and fault == "die":
            os._exit(1)
        if me and fault == "crash":
            raise RuntimeError(f"rank {rank}: injected error in the training step")
        buckets = [torch.full((n,), float(rank), device=env.device) for n in BUCKETS]
        if me and fault == "size":
            buckets[1] = torch.full((BUCKETS[1] + 1,), float(rank), device=env.device)
        if me and fault == "dtype":
            buckets[1] = buckets[1].double()
        order = list(range(len(buckets)))
        if me and fault == "order":
            order.reverse()
        for i in order:
            if me and fault == "skip" and i == 1:
                continue
            mc.all_reduce(buckets[i])
            if me and fault == "extra" and i == 1:
                mc.all_reduce(buckets[i])
        stat = torch.tensor([float(step)], device=env.device)
        gathered = torch.empty(env.world_size, device=env.device)
        if not (me and fault == "last"):
            mc.all_gather_into_tensor(gathered, stat)
        if me and fault == "send":
            mc.send(stat, dst=(rank + 1) % env.world_size)
        if env.world_size > 1 and rank < 2:
            _exchange(mc, torch, rank, env, deadlock=fault == "deadlock")
    log(env, f"{args.steps} steps done, fault {args.fault!r} did not stop the run")
    save(env, args.out, dict(fault=args.fault, steps=args.steps))
    teardown()


def _exchange(mc, torch, rank: int, env, deadlock: bool) -> None:
    """Ranks 0 and 1 swap an activation, like two pipeline stages; with ``deadlock`` both receive first."""
    peer = 1 - rank
    out, into = torch.full((512,), float(rank), device=env.device), torch.empty(512, device=env.device)
    if deadlock or rank == 1:
        mc.recv(into, src=peer)
        mc.send(out, dst=peer)
    else:
        mc.send(out, dst=peer)
        mc.recv(into, src=peer)


def inject(
    fault: str,
    dump_dir: str | Path,
    nproc: int | None = None,
    rank: int = 2,
    step: int = 3,
    steps: int = 6,
    timeout_s: float = 5.0,
):
    """Run the loop with ``fault`` under torchrun, then read every rank's flight record.

    Returns ``(finished process, diagnosis)``; ``timeout_s`` is the package's
    collective timeout (``MYCOLLECTIVES_TIMEOUT``), how long the others wait.
    """
    from labs.scripts.launch import run_job
    from mycollectives import doctor

    args = ["--fault", fault, "--rank", str(rank), "--step", str(step), "--steps", str(steps)]
    env = {"MYCOLLECTIVES_TIMEOUT": str(timeout_s)}
    proc = run_job(
        "faults.py", *args, "--dump-dir", str(dump_dir), nproc=nproc, env=env, timeout=120 + 5 * timeout_s
    )
    return proc, doctor.diagnose(dump_dir)


def _parser():
    from labs.scripts.common import parser

    p = parser(__doc__)
    p.add_argument("--fault", choices=FAULTS, default="none")
    p.add_argument("--rank", type=int, default=2, help="the rank that misbehaves")
    p.add_argument("--step", type=int, default=3, help="the step at which it does")
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--dump-dir", type=Path, default=None, help="MYCOLLECTIVES_FLIGHT_DIR for every rank")
    return p


if __name__ == "__main__":
    main()
