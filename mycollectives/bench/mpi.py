"""Reading the recorded runs of ``benchmarks/vs_mpi.py`` (the package against
MPICH and gloo on one host) for the benchmarks page and chapter 4b."""

from __future__ import annotations

import json
from pathlib import Path

from .factors import format_size


def load_runs(folder: str | Path) -> list[dict]:
    """Every ``np*.json`` of ``folder``, in world-size order."""
    runs = [json.loads(p.read_text()) for p in sorted(Path(folder).glob("np*.json"))]
    return sorted(runs, key=lambda r: r["machine"]["world_size"])


def ratios(run: dict) -> dict[tuple[str, int], dict[str, float]]:
    """``(collective, size) -> {"ours/mpi", "ours/gloo", "mpi", "gloo", "ours"}`` (busbw, GB/s)."""
    out = {}
    for r in run["results"]:
        b = r["busbw"]
        out[r["collective"], r["size"]] = {
            **b,
            "ours/mpi": b["ours"] / b["mpi"],
            "ours/gloo": b["ours"] / b["gloo"],
        }
    return out


def ratio_table(runs: list[dict], column: str = "ours/mpi") -> str:
    """A text table: rows (collective, world size), columns sizes, cells the ratio."""
    if not runs:
        return "no recorded runs (run benchmarks/vs_mpi.py under mpiexec)"
    sizes = sorted({r["size"] for run in runs for r in run["results"]})
    lines = [f"{'busbw ' + column:>28s} " + " ".join(f"{format_size(s):>8s}" for s in sizes)]
    for run in runs:
        p = run["machine"]["world_size"]
        table = ratios(run)
        for collective in dict.fromkeys(r["collective"] for r in run["results"]):
            cells = [table.get((collective, s), {}).get(column) for s in sizes]
            shown = " ".join(f"{c:7.2f}x" if c is not None else f"{'':>8s}" for c in cells)
            lines.append(f"{collective + f' (p={p})':>28s} {shown}")
    m = runs[0]["machine"]
    lines.append(
        f"{m.get('cpu', 'cpu')}, {m.get('mpi', 'MPI')}; one core copies {m.get('copy_gbs', float('nan')):.1f} GB/s"
    )
    return "\n".join(lines)
