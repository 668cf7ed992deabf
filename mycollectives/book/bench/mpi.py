"""Reading the recorded runs of ``benchmarks/vs_mpi.py`` (the package against
MPICH and gloo on one host) for the benchmarks page and chapter 4b."""

from __future__ import annotations

import json
from pathlib import Path

from ...bench.factors import format_size


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


def ratio_table(runs: list[dict], column: str = "ours/mpi", machine: bool = True) -> str:
    """A text table: rows (collective, world size), columns sizes, cells the ratio; then,
    with ``machine``, the CPU, the MPI library and each run's copy bandwidth."""
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
    if not machine:
        return "\n".join(lines)
    m = runs[0]["machine"]
    lines.append(f"{m.get('cpu', 'cpu')}, {' '.join(str(m.get('mpi', 'MPI')).split())}")
    copies = (
        f"{r['machine'].get('copy_gbs', float('nan')):.1f} GB/s (p={r['machine']['world_size']})"
        for r in runs
    )
    lines.append("one core copies " + ", ".join(copies))
    return "\n".join(lines)


def call_us(run: dict, collective: str, size: int) -> dict[str, float]:
    """Microseconds per call of each implementation (the slowest rank's median) at ``size``."""
    for r in run["results"]:
        if r["collective"] == collective and r["size"] == size:
            return {impl: 1e6 * sorted(t)[len(t) // 2] for impl, t in r["times_s"].items()}
    raise KeyError(f"no {collective} of {size} bytes in the run on {run['machine']['world_size']} ranks")


def bounds(runs: list[dict], collective: str = "all_reduce") -> str:
    """What bounds each end: the time of a call at the smallest size, and at the
    largest the busbw against one core's copy bandwidth (measured in the same job)."""
    lines = []
    for run in runs:
        p, gbs = run["machine"]["world_size"], run["machine"]["copy_gbs"]
        sizes = sorted(r["size"] for r in run["results"] if r["collective"] == collective)
        small, large = call_us(run, collective, sizes[0]), ratios(run)[collective, sizes[-1]]
        lines.append(
            f"{collective}, p={p}: {format_size(sizes[0])} in {small['ours']:.0f} us (MPICH {small['mpi']:.0f}, "
            f"gloo {small['gloo']:.0f});\n    {format_size(sizes[-1])} at {large['ours']:.2f} GB/s busbw, "
            f"{large['ours'] / gbs:.0%} of one core's {gbs:.1f} GB/s copy"
        )
    return "\n".join(lines)
