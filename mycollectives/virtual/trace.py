"""What a virtual run shows: a table per rank, and a Chrome trace / Perfetto timeline.

:class:`Metered` is the run's network, counting the bytes each GPU sends by
the class of link its route crosses (NVLink; PCIe; the network, when any
link of the route is a NIC's or a switch's between nodes). :func:`table`
gives, per rank: its virtual time, its compute, its *exposed*
communication (time its communication streams were busy while its compute
was not) and those bytes. :func:`chrome_trace` writes the run as the JSON
Trace Event Format that ``torch.profiler`` exports and that Perfetto and
``chrome://tracing`` open: one process per rank, a thread (track) each for
compute, blocking communication and the communication stream, complete
events (``"ph": "X"``) in microseconds of virtual time, each collective
named, with its size and the algorithm that ran it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from ..topology.graph import NET, NVLINK, PCI
from .network import Network

CLASSES = {NVLINK: "NVLink", PCI: "PCIe", NET: "network"}
TRACKS = {"compute": 0, "comm": 1, "stream": 2}  # thread id of each lane in a rank's process


class Metered(Network):
    """The run's :class:`~.network.Network`, counting bytes per sending GPU and link class."""

    def __init__(self, model):
        super().__init__(model)
        self.sent = np.zeros((self.topo.num_gpus, len(CLASSES)))
        self._class: dict[tuple[int, int], int] = {}

    def post(self, src: int, dst: int, nbytes: int, *args, **kwargs) -> None:
        key = (src, dst)
        cls = self._class.get(key)
        if cls is None:  # the class of the route's slowest kind of link (any rail: they cross the same kinds)
            links = self.links(src, dst)
            cls = self._class[key] = int(self.topo.link_class[links].max()) if len(links) else NVLINK
        self.sent[src, cls] += nbytes
        super().post(src, dst, nbytes, *args, **kwargs)


def _union(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[list[float]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def _overlap(xs: list[tuple[float, float]], ys: list[tuple[float, float]]) -> float:
    """Total length of the intersection of two unions of intervals (each sorted, disjoint)."""
    total, i, j = 0.0, 0, 0
    while i < len(xs) and j < len(ys):
        lo, hi = max(xs[i][0], ys[j][0]), min(xs[i][1], ys[j][1])
        total += max(0.0, hi - lo)
        if xs[i][1] < ys[j][1]:
            i += 1
        else:
            j += 1
    return total


def per_rank(run) -> list[dict]:
    """Each rank's virtual time, compute, communication (busy, and exposed) and bytes sent by link class."""
    p = len(run.clocks)
    compute: list[list] = [[] for _ in range(p)]
    comm: list[list] = [[] for _ in range(p)]
    for rank, lane, start, end in run.spans:
        (compute if lane == "compute" else comm)[rank].append((start, end))
    sent = run.stats.get("sent")
    rows = []
    for r in range(p):
        cu, mu = _union(compute[r]), _union(comm[r])
        busy = sum(b - a for a, b in mu)
        row = {
            "rank": r,
            "time": run.clocks[r],
            "compute": sum(b - a for a, b in cu),
            "comm": busy,
            "exposed": busy - _overlap(cu, mu),
        }
        gpu = r  # rank r runs on GPU r of the cluster (world_size= takes the first GPUs)
        for k, name in CLASSES.items():
            row[f"bytes {name}"] = float(sent[gpu, k]) if sent is not None else 0.0
        rows.append(row)
    return rows


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"


def table(run, title: str | None = None) -> str:
    """The per-rank table (see the module), labelled as virtual time on the run's cluster."""
    title = title or f"virtual time on {run.topology.name} ({len(run.clocks)} ranks; not wall time)"
    head = f"{'rank':>4} {'virtual ms':>11} {'compute ms':>11} {'exposed comm ms':>16} {'comm busy ms':>13}"
    head += "".join(f" {name + ' sent':>13}" for name in CLASSES.values())
    lines = [title, head]
    for row in per_rank(run):
        line = f"{row['rank']:>4} {row['time'] * 1e3:>11.3f} {row['compute'] * 1e3:>11.3f}"
        line += f" {row['exposed'] * 1e3:>16.3f} {row['comm'] * 1e3:>13.3f}"
        line += "".join(f" {_size(row['bytes ' + name]):>13}" for name in CLASSES.values())
        lines.append(line)
    return "\n".join(lines)


def _call_args(entry) -> tuple[str, dict]:
    """A call's name and details from its flight-recorder entry (None: the recorder was off)."""
    if entry is None:
        return "communication", {}
    kind, fn, asked, dtype, count, root, op = entry.call
    args = {"collective": fn, "algorithm": getattr(entry, "algorithm", None) or asked}
    if dtype is not None and count is not None:
        args |= {"dtype": str(dtype).replace("torch.", ""), "count": int(count)}
        args["bytes"] = int(count) * _itemsize(dtype)
    return fn, args


def _itemsize(dtype) -> int:
    import torch

    return torch.empty((), dtype=dtype).element_size() if isinstance(dtype, torch.dtype) else 0


def chrome_trace(run) -> dict:
    """The run as a Trace Event Format object (see the module)."""
    events: list[dict] = []
    for r in range(len(run.clocks)):
        events.append({"ph": "M", "name": "process_name", "pid": r, "tid": 0, "args": {"name": f"rank {r}"}})
        events.append(
            {"ph": "M", "name": "process_sort_index", "pid": r, "tid": 0, "args": {"sort_index": r}}
        )
        for lane, tid in TRACKS.items():
            label = {"compute": "compute (GPU)", "comm": "communication", "stream": "communication stream"}[
                lane
            ]
            events.append({"ph": "M", "name": "thread_name", "pid": r, "tid": tid, "args": {"name": label}})
    for rank, lane, start, end in run.spans:
        if lane == "compute":
            events.append(_event("compute", rank, lane, start, end, {}))
    for rank, lane, start, end, entry in run.calls:
        name, args = _call_args(entry)
        events.append(_event(name, rank, lane, start, end, args))
    other = {"clock": "virtual time", "cluster": run.topology.name, "ranks": len(run.clocks)}
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": other}


def _event(name: str, rank: int, lane: str, start: float, end: float, args: dict) -> dict:
    return {
        "name": name,
        "cat": lane,
        "ph": "X",
        "pid": rank,
        "tid": TRACKS[lane],
        "ts": start * 1e6,
        "dur": max(end - start, 0.0) * 1e6,
        "args": args,
    }


def write(run, path: str | os.PathLike) -> Path:
    """Write :func:`chrome_trace` of ``run`` to ``path`` (JSON); returns the path."""
    path = Path(path)
    path.write_text(json.dumps(chrome_trace(run)))
    return path
