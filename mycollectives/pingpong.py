"""Calibrating the cost model on a live group by ping-pong (chapter 2).

Ranks 0 and 1 bounce messages of doubling sizes; half a round trip is
``alpha + beta n`` (:func:`mycollectives.cost.fit_alpha_beta`). Gamma comes
from timing an in-place add on this rank's device (what a reduction does to
each byte that arrives). Every rank of the group must call :func:`calibrate`;
rank 0's fit is broadcast so that every rank returns the same
:class:`~mycollectives.cost.Calibration`.
"""

from __future__ import annotations

import numpy as np
import torch

from .api.broadcast import broadcast
from .api.p2p import recv, send
from .cost import Calibration, Machine, fit_alpha_beta
from .timing import now
from .transport import resolve_group


def _pingpong(rank: int, group, nbytes: int, reps: int, device) -> float:
    buf = torch.zeros(max(nbytes // 4, 1), dtype=torch.float32, device=device)
    best = float("inf")
    for _ in range(reps):
        t0 = now()
        if rank == 0:
            send(buf, 1, group=group)
            recv(buf, 1, group=group)
        elif rank == 1:
            recv(buf, 0, group=group)
            send(buf, 0, group=group)
        best = min(best, now() - t0)
    return best / 2


def measure_gamma(nbytes: int = 1 << 22, reps: int = 5, device=None) -> float:
    """Seconds per byte of ``a += b`` on float32 tensors of ``nbytes`` each."""
    a = torch.ones(nbytes // 4, device=device)
    b = torch.ones_like(a)
    best = float("inf")
    for _ in range(reps):
        t0 = now()
        a.add_(b)
        if a.is_cuda:
            torch.cuda.synchronize()
        best = min(best, now() - t0)
    return best / nbytes


def calibrate(group=None, sizes=None, reps: int = 5, device=None) -> Calibration:
    """Fit the alpha-beta-gamma model on ``group`` (call on every rank).

    Introduced in the book's chapter 2 (point-to-point); chapter 3b feeds the
    result to :func:`mycollectives.cost.predict`.
    """
    t = resolve_group(group)
    if t.world_size < 2:
        raise ValueError("calibrate needs a group of at least 2 ranks (ranks 0 and 1 ping-pong)")
    sizes = np.asarray(sizes if sizes is not None else [4 << k for k in range(0, 21, 2)], dtype=np.int64)
    times = np.array([_pingpong(t.rank, group, int(n), reps, device) for n in sizes])
    gamma = measure_gamma(device=device)
    out = torch.tensor([*times, gamma], dtype=torch.float64)
    broadcast(out, 0, group=group, algorithm="linear")
    times, gamma = out[:-1].numpy(), float(out[-1])
    alpha, beta, r2, err = fit_alpha_beta(sizes, times)
    return Calibration(Machine(alpha, beta, gamma), sizes, times, r2, err)
