"""What a simulation returns, in nccl-tests' vocabulary (chapter 4).

``algbw`` is the collective's size over its time; ``busbw`` scales it by the
factor that makes it comparable with a link's bandwidth whatever the number
of ranks (nccl-tests' ``doc/PERFORMANCE.md``, ``nccl_tests_perf``), the
collective record's :meth:`~mycollectives.collectives.Collective.bound`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..topology import Topology


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
    latency_s: float = 0.0  # NCCL's latency, for NCCL's algorithms (sim.nccl)
    bound_busbw: float = float("nan")  # busbw the links alone allow, for NCCL's algorithms
    channels: int = 0  # NCCL's channels, for NCCL's algorithms

    @property
    def algbw(self) -> float:
        """``nbytes / time_s / 1e9``, in GB/s."""
        return self.nbytes / self.time_s / 1e9 if self.time_s > 0 else float("inf")

    @property
    def busbw(self) -> float:
        """``algbw`` times the collective's bus factor, in GB/s."""
        return self.algbw * self.bus_factor if self.bus_factor else 0.0

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

    def bytes_into(self, kind: str) -> float:
        """Bytes carried by the links that end at a vertex of ``kind`` (``"spine"``, ``"nic"``, ...)."""
        topo = self.topology
        into = np.array([topo.kinds[v] == kind for v in topo.link_dst], dtype=bool)
        return float(self.link_bytes[into].sum())

    def busy(self, kind: str) -> list[int]:
        """The vertices of ``kind`` that a link carrying traffic starts or ends at (say, the NICs used)."""
        topo = self.topology
        active = np.flatnonzero(self.link_bytes)
        ends = set(topo.link_src[active].tolist()) | set(topo.link_dst[active].tolist())
        return sorted(v for v in ends if topo.kinds[v] == kind)

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
