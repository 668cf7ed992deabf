"""Sharing links among the flows of one round: max-min fairness (chapter 4, "Contention").

Every flow of a round starts at once. Each link's bandwidth is split among
the flows crossing it so that no flow can go faster without slowing one
that is already slower (max-min fairness, the steady state of TCP-like and
credit-based flow control). Progressive filling computes it: raise all rates
together until some link is full, freeze the flows through it, repeat. When a
flow finishes the others speed up, so the round is simulated event by event
until every flow is done.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

EPS = 1e-9  # relative tolerance: a flow whose share is within it of a link's fair share is frozen there


@dataclass(frozen=True)
class Paths:
    """Flow-to-link incidence, sorted by flow: entries ``flow[j]`` uses ``link[j]``.

    ``local[j]`` numbers the links this round uses ``0..len(links)-1``.
    """

    flow: np.ndarray
    link: np.ndarray
    links: np.ndarray  # the distinct links used
    local: np.ndarray
    starts: np.ndarray  # first entry of each flow
    nflows: int

    @classmethod
    def of(cls, flow: np.ndarray, link: np.ndarray, nflows: int) -> Paths:
        order = np.argsort(flow, kind="stable")
        flow, link = flow[order], link[order]
        links, local = np.unique(link, return_inverse=True)
        starts = np.searchsorted(flow, np.arange(nflows))
        return cls(flow, link, links, local, starts, nflows)


def max_min_rates(paths: Paths, cap: np.ndarray, active: np.ndarray) -> np.ndarray:
    """Max-min fair rate of every active flow; ``cap`` is per distinct link."""
    rate = np.zeros(paths.nflows)
    rem = cap.astype(float).copy()
    live = active[paths.flow]
    flow, local = paths.flow[live], paths.local[live]  # entries of unfrozen flows, still sorted by flow
    while len(flow):
        users = np.bincount(local, minlength=len(rem))
        share = rem / np.maximum(users, 1)
        starts = np.flatnonzero(np.diff(flow, prepend=-1))
        fshare = np.minimum.reduceat(share[local], starts)  # each live flow's tightest link
        s = fshare.min()
        frozen = fshare <= s * (1 + EPS)
        rate[flow[starts[frozen]]] = s
        done = np.repeat(frozen, np.diff(np.append(starts, len(flow))))
        rem = np.maximum(rem - np.bincount(local[done], minlength=len(rem)) * s, 0)
        flow, local = flow[~done], local[~done]
    return rate


def drain(paths: Paths, cap: np.ndarray, nbytes: np.ndarray) -> tuple[float, np.ndarray]:
    """Time until every flow has moved its bytes, and each flow's finishing time."""
    left = nbytes.astype(float).copy()
    active = left > 0
    finish = np.zeros(paths.nflows)
    t = 0.0
    while active.any():
        rate = max_min_rates(paths, cap, active)
        dt = (left[active] / rate[active]).min()
        t += dt
        left = np.where(active, left - rate * dt, left)
        done = active & (left <= nbytes * EPS + 1e-12)
        finish[done] = t
        active &= ~done
    return t, finish
