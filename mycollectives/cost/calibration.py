"""Fitting alpha and beta to ping-pong times (chapter 2, "ping-pong").

Half a round trip of ``n`` bytes is ``alpha + beta n``, fitted by least
squares (:func:`fit_alpha_beta`). The measurement itself runs on a live group
and lives above the API, in :mod:`mycollectives.pingpong`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

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
            f"gamma = {m.gamma * 1e9:.4f} ns/B",
            f"R^2 = {self.r2:.4f}, worst point off by {100 * self.max_rel_error:.0f} %",
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
