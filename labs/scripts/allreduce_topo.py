"""Lab 8: flat ring against the hierarchical all-reduce, on one node or many.

    # one node
    torchrun --standalone --nproc-per-node 8 labs/scripts/allreduce_topo.py --out topo.json
    # two nodes (run on each; see labs/slurm/lab8_allreduce.sbatch)
    torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint HEAD:29500 \\
        labs/scripts/allreduce_topo.py --out topo.json

``hierarchical`` reduce-scatters inside each node (local rank ``j`` ends with
chunk ``j`` summed over its node), all-reduces chunk ``j`` across the nodes among
the ranks of local rank ``j`` (one ring per rail, so every NIC carries ``1/L`` of
the vector), then all-gathers inside the node; ``local_size`` is the ranks per node (torchrun's LOCAL_WORLD_SIZE, or ``--local-size`` to pretend a
single machine is several nodes). Every result is checked, and the backend's
own ``all_reduce`` (NCCL or gloo) runs in the same loop for comparison.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

import mycollectives as mc
from labs.scripts.common import (
    Env,
    launch,
    log,
    native_group,
    parser,
    save,
    setup,
    teardown,
    time_label,
    timed,
)
from mycollectives.pingpong import calibrate


def check(env: Env, t: torch.Tensor, what: str) -> None:
    p = env.world_size
    want = p * (p + 1) / 2  # every rank contributed rank + 1
    assert bool((t == want).all()), f"{what} on rank {env.rank}: wrong sum (expected {want})"


def main() -> None:
    args = parser(__doc__)
    args.add_argument(
        "--local-size", type=int, default=None, help="ranks per node (default LOCAL_WORLD_SIZE)"
    )
    args.add_argument("--max-bytes", type=int, default=None)
    args.add_argument(
        "--calibrate", action="store_true", help="fit alpha, beta, gamma on ranks 0 and 1 first"
    )
    a = args.parse_args()
    env = setup()
    p = env.world_size
    local = a.local_size or env.local_size
    max_bytes = a.max_bytes or ((1 << 30) if env.gpu else (4 << 20))
    sizes = [n for n in (1 << k for k in range(10, 31, 2)) if n <= max_bytes]
    reps = 10 if env.gpu else 1 if env.mode == "virtual" else 3  # virtual time is deterministic
    log(
        env,
        f"{p} ranks, {local} per node ({p // local} nodes), {env.backend}; sizes {sizes[0]} .. {sizes[-1]} B",
    )
    log(env, f"times are {time_label(env)}")
    calib = None
    if a.calibrate:
        c = calibrate(device=env.device, reps=5)
        calib = dict(alpha=c.machine.alpha, beta=c.machine.beta, gamma=c.machine.gamma, r2=c.r2)
        log(env, c.report().splitlines()[0])
    native = native_group()  # the backend's own all-reduce, on a communicator of its own
    variants = {
        "ring": lambda t: mc.all_reduce(t, algorithm="ring"),
        "hierarchical": lambda t: mc.all_reduce(t, algorithm="hierarchical", local_size=local),
        f"{env.backend} (native)": lambda t: dist.all_reduce(t, group=native),
    }
    rows = []
    for n in sizes:
        buf = torch.empty(n // 4, device=env.device)
        for name, fn in variants.items():
            # each run starts from rank + 1, and the last one is checked; a real machine warms up
            # once first, while virtual time is the same on every run
            run = lambda fn=fn, buf=buf: fn(buf.fill_(env.rank + 1))  # noqa: E731
            sec = timed(env, run, reps, warmup=int(env.mode != "virtual"))
            check(env, buf, f"{name} all_reduce of {n} B")
            busbw = 2 * (p - 1) / p * n / sec / 1e9  # nccl-tests' bus bandwidth for all-reduce
            rows.append(dict(algorithm=name, nbytes=n, time=sec, busbw=busbw))
            log(env, f"{n:>12d} B  {name:16s} {sec * 1e6:12.1f} us  busbw {busbw:8.3f} GB/s")
    save(env, a.out, dict(local_size=local, rows=rows, calibration=calib))
    teardown()


if __name__ == "__main__":
    launch(main)
