"""What a simulation returns, in nccl-tests' vocabulary (chapter 4).

``algbw`` is the collective's size over its time; ``busbw`` scales it by the
factor that makes it comparable with a link's bandwidth whatever the number
of ranks (nccl-tests' ``doc/PERFORMANCE.md``, ``nccl_tests_perf``):
``2(p-1)/p`` for all-reduce, ``(p-1)/p`` for all-gather, reduce-scatter and
all-to-all, 1 for broadcast and reduce.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..algorithms import canonical
from ..topology import Topology


def bus_factor(collective: str, p: int) -> float:
    """nccl-tests' busbw / algbw ratio for ``collective`` on ``p`` ranks."""
    c = canonical(collective)
    if p <= 1 or c == "barrier":
        return 0.0 if c == "barrier" else 1.0
    if c == "all_reduce":
        return 2 * (p - 1) / p
    if c in ("broadcast", "reduce"):
        return 1.0
    return (p - 1) / p  # all_gather, reduce_scatter, all_to_all, scatter, gather


@dataclass(frozen=True, eq=False)
class SimResult:
    """One simulated collective: totals, a per-round timeline, per-link traffic."""

    collective: str
    algorithm: str
    protocol: str
    nbytes: int
    world_size: int
    topology: Topology
    time_s: float
    bus_factor: float
    round_start: np.ndarray  # seconds
    round_time: np.ndarray  # seconds
    round_flows: np.ndarray  # messages in flight
    round_busiest: np.ndarray  # link with the highest bytes / bandwidth (-1: none)
    link_bytes: np.ndarray  # bytes each link carried over the whole collective
    round_link_bytes: np.ndarray | None  # (rounds, links), when small enough to keep

    @property
    def algbw(self) -> float:
        """``nbytes / time_s / 1e9``, in GB/s."""
        return self.nbytes / self.time_s / 1e9 if self.time_s > 0 else float("inf")

    @property
    def busbw(self) -> float:
        """``algbw`` times the collective's bus factor, in GB/s."""
        return self.algbw * self.bus_factor

    @property
    def link_utilisation(self) -> np.ndarray:
        """Fraction of each link's usable bandwidth used over the whole run."""
        return self.link_bytes / (self.topology.link_bw * max(self.time_s, 1e-300))

    def round_utilisation(self) -> np.ndarray | None:
        """(rounds, links): fraction of each link's bandwidth used during each round."""
        if self.round_link_bytes is None:
            return None
        t = np.maximum(self.round_time, 1e-300)[:, None]
        return self.round_link_bytes / (self.topology.link_bw[None, :] * t)

    def timeline(self) -> list[dict]:
        """One row per round: start and duration (us), messages, busiest link."""
        names = self.topology.names
        rows = []
        for i in range(len(self.round_time)):
            k = int(self.round_busiest[i])
            where = (
                f"{names[self.topology.link_src[k]]}->{names[self.topology.link_dst[k]]}" if k >= 0 else ""
            )
            rows.append(
                dict(
                    round=i,
                    start_us=self.round_start[i] * 1e6,
                    time_us=self.round_time[i] * 1e6,
                    messages=int(self.round_flows[i]),
                    busiest_link=where,
                )
            )
        return rows

    def __repr__(self) -> str:
        return (
            f"SimResult({self.collective}/{self.algorithm}/{self.protocol} on {self.topology.name}, "
            f"p={self.world_size}, {self.nbytes} B: {self.time_s * 1e6:.1f} us, "
            f"algbw {self.algbw:.1f} GB/s, busbw {self.busbw:.1f} GB/s)"
        )
