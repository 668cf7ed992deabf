"""Lab 2: ping-pong between every pair of ranks; alpha and beta per pair.

    torchrun --standalone --nproc-per-node 8 labs/scripts/pingpong.py --out pingpong.json
    python labs/scripts/pingpong.py --virtual dgx_h100:2 --out pingpong.json   # 16 virtual GPUs, no torchrun

Pairs take turns (one pair at a time, the others wait at a barrier), so each
measurement sees an idle machine. Rank ``i`` sends ``n`` bytes to rank ``j``
with ``mycollectives.send``, ``j`` sends them back; half the round trip is
the one-way time ``alpha + beta n``, fitted per pair by least squares.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.distributed as dist

import mycollectives as mc
from labs.scripts.common import (
    Env,
    clock,
    launch,
    log,
    native_group,
    parser,
    save,
    setup,
    teardown,
    time_label,
)
from mycollectives.cost.calibration import fit_alpha_beta


def one_way_time(env: Env, peer: int, first: bool, nbytes: int, reps: int, token: float) -> float:
    """Seconds for one message of ``nbytes`` from this rank to ``peer`` (or back)."""
    buf = torch.full((max(nbytes // 4, 1),), token if first else -1.0, device=env.device)
    best = float("inf")
    for _ in range(reps + 1):  # the first round trip is a warm-up
        t0 = clock(env)
        if first:
            mc.send(buf, peer)
            mc.recv(buf, peer)
        else:
            mc.recv(buf, peer)
            mc.send(buf, peer)
        best = min(best, clock(env) - t0) if _ else float("inf")
    # the payload really made the trip: the second rank holds the first rank's token
    assert bool((buf == token).all()), f"rank {env.rank}: corrupted payload from rank {peer}"
    return best / 2  # the fastest round trip, halved


def main() -> None:
    args = parser(__doc__)
    args.add_argument(
        "--max-bytes", type=int, default=None, help="largest message (default: 256 MiB on GPUs, 1 MiB on CPU)"
    )
    args.add_argument("--reps", type=int, default=None)
    a = args.parse_args()
    env = setup()
    max_bytes = a.max_bytes or ((256 << 20) if env.gpu else (1 << 20))
    reps = a.reps or (20 if env.gpu else 10)
    sizes = [n for n in (4 << k for k in range(0, 40, 2)) if n <= max_bytes]
    p = env.world_size
    pairs = [(i, j) for i in range(p) for j in range(i + 1, p)]
    times = torch.zeros(len(pairs), len(sizes), dtype=torch.float64, device=env.device)
    log(env, f"{len(pairs)} pairs x {len(sizes)} sizes (4 B .. {max_bytes} B), {reps} round trips each")
    log(env, f"times are {time_label(env)}")
    for k, (i, j) in enumerate(pairs):
        dist.barrier(group=native_group())
        if env.rank in (i, j):
            peer = j if env.rank == i else i
            for s, n in enumerate(sizes):
                t = one_way_time(env, peer, env.rank == i, n, reps, token=float(1000 * i + j))
                if env.rank == i:
                    times[k, s] = t
    mc.all_reduce(times)  # each pair's times were filled in by its first rank only
    times = times.cpu().numpy()
    fits = [fit_alpha_beta(sizes, row) for row in times]
    alpha = np.zeros((p, p))
    bw = np.zeros((p, p))  # GB/s at the largest message
    for (i, j), row, (a_, _, _, _) in zip(pairs, times, fits):
        alpha[i, j] = alpha[j, i] = a_
        bw[i, j] = bw[j, i] = sizes[-1] / row[-1] / 1e9
    for (i, j), (a_, b_, r2, _) in zip(pairs, fits):
        log(
            env,
            f"pair {i}-{j}: alpha {a_ * 1e6:8.2f} us  1/beta {1 / b_ / 1e9 if b_ else float('inf'):8.2f} GB/s  R^2 {r2:.3f}",
        )
    save(
        env,
        a.out,
        dict(
            sizes=sizes,
            pairs=pairs,
            times=times.tolist(),
            alpha=[f[0] for f in fits],
            beta=[f[1] for f in fits],
            r2=[f[2] for f in fits],
            alpha_matrix=alpha.tolist(),
            bw_matrix=bw.tolist(),
        ),
    )
    teardown()


if __name__ == "__main__":
    launch(main)
