"""Fitting alpha, beta and gamma on a live group (chapter 2, "ping-pong").

Ranks 0 and 1 bounce messages of doubling sizes; half a round trip is
``alpha + beta n``, fitted by least squares. Gamma comes from timing an
in-place add on this rank's device (what a reduction does to each byte that
arrives). Every rank of the group must call :func:`calibrate`; rank 0's fit
is broadcast so that every rank returns the same :class:`Calibration`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch

from .counted import Machine


@dataclass(frozen=True)
class Calibration:
    """A fitted :class:`Machine`, the measurements and how well the line fits them."""

    machine: Machine
    sizes: np.ndarray  # bytes
    times: np.ndarray  # seconds, one way
    r2: float  # coefficient of determination of the alpha-beta line
    max_rel_error: float  # largest |fit - measured| / measured

    def report(self) -> str:
        """The fit in words and a table of measured against fitted times."""
        m = self.machine
        lines = [
            f"alpha = {m.alpha * 1e6:.2f} us, beta = {m.beta * 1e9:.4f} ns/B ({1 / m.beta / 1e9 if m.beta else float('inf'):.2f} GB/s), "
            f"gamma = {m.gamma * 1e9:.4f} ns/B; R^2 = {self.r2:.4f}, worst point off by {100 * self.max_rel_error:.0f} %",
            f"{'bytes':>10} {'measured us':>12} {'fitted us':>10}",
        ]
        for n, t in zip(self.sizes, self.times):
            lines.append(f"{int(n):10d} {t * 1e6:12.2f} {(m.alpha + m.beta * n) * 1e6:10.2f}")
        return "\n".join(lines)


def fit_alpha_beta(sizes, times) -> tuple[float, float, float, float]:
    """Least-squares ``t = alpha + beta n``; returns alpha, beta, R^2, max relative error.

    Points are weighted by ``1/t`` so small messages (which fix alpha) count
    as much as large ones (which fix beta).
    """
    n, t = np.asarray(sizes, float), np.asarray(times, float)
    w = 1.0 / t
    a = np.stack([np.ones_like(n), n], axis=1) * w[:, None]
    (alpha, beta), *_ = np.linalg.lstsq(a, t * w, rcond=None)
    alpha, beta = max(float(alpha), 0.0), max(float(beta), 0.0)
    fit = alpha + beta * n
    r2 = 1.0 - float(((t - fit) ** 2).sum() / max(((t - t.mean()) ** 2).sum(), 1e-300))
    return alpha, beta, r2, float(np.max(np.abs(fit - t) / t))


def _pingpong(rank: int, group, nbytes: int, reps: int, device) -> float:
    from .. import recv, send

    buf = torch.zeros(max(nbytes // 4, 1), dtype=torch.float32, device=device)
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        if rank == 0:
            send(buf, 1, group=group)
            recv(buf, 1, group=group)
        elif rank == 1:
            recv(buf, 0, group=group)
            send(buf, 0, group=group)
        best = min(best, time.perf_counter() - t0)
    return best / 2


def measure_gamma(nbytes: int = 1 << 22, reps: int = 5, device=None) -> float:
    """Seconds per byte of ``a += b`` on float32 tensors of ``nbytes`` each."""
    a = torch.ones(nbytes // 4, device=device)
    b = torch.ones_like(a)
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        a.add_(b)
        if a.is_cuda:
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t0)
    return best / nbytes


def calibrate(group=None, sizes=None, reps: int = 5, device=None) -> Calibration:
    """Fit the alpha-beta-gamma model on ``group`` (call on every rank).

    Introduced in the book's chapter 2 (point-to-point); chapter 3 feeds the
    result to :func:`mycollectives.cost.predict`.
    """
    from .. import broadcast
    from ..transport import resolve_group

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
