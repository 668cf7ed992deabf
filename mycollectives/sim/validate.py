"""The simulator against published measurements (the book's appendix page of that name).

``published.json`` beside this module holds published busbw figures of NCCL
collectives, each with its source (URL, a verbatim quote, what was run, a
``references.bib`` key), its size, collective, node type, node count and NICs,
and how the simulator models it (``model``: the cluster, the algorithm when the
run forced or stated one, assumptions where the source is silent). Each point
is in one of three sets, fixed by rules on what the source says, not by how
well the model does:

* ``asserted``: nccl-tests' busbw (or a benchmark reporting nccl-tests' busbw
  formula) on InfiniBand or RoCE machines the presets describe, with a stated
  size or a stated peak; a test holds these to the targets of ``TARGETS``;
* ``outside``: kept in the table with the reason: networks the presets do not
  model (AWS EFA, Google's TCPX stacks), sizes not stated, low-confidence
  fragments, values the source itself calls anomalous, and the model's known
  limits (NVLS across an NVL72 rack, all-to-all inside one node);
* ``deepep``: DeepEP's dispatch/combine bandwidths, which are not busbw,
  compared with the links they run on in a separate table.

The simulator is never tuned point by point: every point runs the same
simulator (:func:`~mycollectives.sim.simulate_nccl`). This module computes;
the page's table is written by ``mycollectives.viz.validation``
(``python -m mycollectives.viz.validation`` writes ``chapters/_validation_table.md``).
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ..topology import cluster
from .nccl import choose, simulate_nccl
from .result import SimResult

DATA = Path(__file__).with_name("published.json")
TARGETS = {"median": 0.10, "worst": 0.20}  # |simulated / published - 1| over the asserted set


@dataclass(frozen=True)
class Point:
    """One published measurement and how the simulator models it."""

    id: str
    collective: str
    gpu: str
    nodes: int
    gpus_per_node: int
    busbw: float  # GB/s, as published
    source: str  # references.bib key
    url: str
    set: str  # "asserted", "outside" or "deepep"
    why_outside: str | None
    model: dict | None
    raw: dict  # every field of the record

    @property
    def setup(self) -> str:
        n = f"{self.nodes} x " if self.nodes > 1 else ""
        return f"{n}{self.gpus_per_node} {self.gpu.upper()}"


@cache
def points() -> tuple[Point, ...]:
    """Every point of ``published.json``."""
    out = []
    for r in json.loads(DATA.read_text()):
        out.append(Point(r["id"], r["collective"], r["gpu"], r["nodes"], r["gpus_per_node"], r["busbw_gbs"],
                         r["bib"], r["source_url"], r["set"], r["why_outside"], r["model"], r))  # fmt: skip
    return tuple(out)


def evaluate(p: Point) -> tuple[SimResult, float]:
    """Simulate a point as its ``model`` says; returns the result and the relative error of its busbw."""
    if p.model is None:
        raise ValueError(f"{p.id}: the simulator has no model of this point ({p.why_outside})")
    m = p.model
    topo = cluster(m["node"], m["nodes"], nics_per_node=m["nics_per_node"], nic=m["nic"], nvls=m["nvls"],
                   sharp=m["sharp"], gpus_per_node=m["gpus_per_node"])  # fmt: skip
    forced = [m["algorithm"]] if m["algorithm"] else None
    algorithm, protocol, _ = choose(p.collective, m["size"], topo, m["gpus"], forced)
    r = simulate_nccl(p.collective, algorithm, m["size"], topo, protocol=protocol, world_size=m["gpus"])
    return r, r.busbw / p.busbw - 1


@cache
def results() -> dict[str, tuple[SimResult, float]]:
    """:func:`evaluate` of every point that has a model."""
    return {p.id: evaluate(p) for p in points() if p.model is not None}


def pairs(which: str = "asserted") -> list[tuple[float, float]]:
    """``(published, simulated)`` busbw of every modelled point of a set (chapter 4's validation plot)."""
    got = results()
    return [(p.busbw, got[p.id][0].busbw) for p in points() if p.set == which and p.model is not None]


def summary(which: str = "asserted") -> dict[str, float]:
    """Median and worst absolute relative error over a set, and its size."""
    errs = [abs(results()[p.id][1]) for p in points() if p.set == which and p.model is not None]
    return {"points": len(errs), "median": statistics.median(errs), "worst": max(errs)}


def deepep_link(p: Point) -> tuple[str, float]:
    """The link a DeepEP point runs on and its bandwidth (GB/s), as DeepEP's README
    quotes them: NVLink inside a node, one 400 Gb/s CX7 NIC (about 50 GB/s) across."""
    if p.nodes == 1:
        return "NVLink", {"h800": 160.0, "h100": 450.0, "b200": 900.0}[p.gpu]
    return "RDMA", 50.0
