"""What the benchmark pages (the benchmarks page, chapter 3b, lab 3) print of a
sweep: the bench's table narrowed to a page's width, and how often the model's
fastest algorithm is the measured fastest."""

from __future__ import annotations

from collections.abc import Sequence

from ...bench.predicted import Point
from ...bench.report import time_str
from ...bench.runner import Result


def compact(results: Sequence[Result], algorithms: Sequence[str] | None = None) -> str:
    """The table narrowed for a page: per size, each algorithm's time (us) and busbw (GB/s).

    nccl-tests' row is 52 characters before the first algorithm and 32 per
    algorithm; a book page holds 100. This keeps the size and, per
    algorithm, the two columns a reader compares (``#wrong`` is checked
    elsewhere; count, type, redop and root are the same on every row).
    """
    algorithms = list(algorithms or dict.fromkeys(r.algorithm for r in results))
    width = max(21, *(len(a) + 2 for a in algorithms))  # the 19-character header, two spaces
    lines = [f"{'':>10s}" + "".join(f"{a:>{width}s}" for a in algorithms)]
    lines.append(f"{'size (B)':>10s}" + f"{'time us  busbw GB/s':>{width}s}" * len(algorithms))
    for size in sorted({r.size for r in results}):
        by = {r.algorithm: r for r in results if r.size == size}
        cells = [
            f"{time_str(by[a].time_us):>9s} {by[a].busbw:{width - 10}.2f}"
            if a in by
            else f"{'N/A':>{width}s}"
            for a in algorithms
        ]
        lines.append(f"{size:10d}" + "".join(cells))
    return "\n".join(lines)


def compact_rows(rows: Sequence[Sequence[str]], algorithms: Sequence[str]) -> str:
    """:func:`compact` for a printed table's rows (:func:`parse_table`), algorithms in column order."""
    width = max(21, *(len(a) + 2 for a in algorithms))  # the 19-character header, two spaces
    lines = [f"{'':>10s}" + "".join(f"{a:>{width}s}" for a in algorithms)]
    lines.append(f"{'size (B)':>10s}" + f"{'time us  busbw GB/s':>{width}s}" * len(algorithms))
    for r in rows:
        cells = [f"{r[5 + 4 * k]:>9s} {r[7 + 4 * k]:>{width - 10}s}" for k in range(len(algorithms))]
        lines.append(f"{int(r[0]):10d}" + "".join(cells))
    return "\n".join(lines)


def winners_agree(points: Sequence[Point]) -> tuple[int, int]:
    """At how many ``(collective, size)`` the predicted fastest algorithm is the
    measured fastest, and of how many: what a tuner needs from a model."""
    groups: dict[tuple[str, int], list[Point]] = {}
    for q in points:
        groups.setdefault((q.collective, q.size), []).append(q)
    agree = sum(
        min(g, key=lambda q: q.measured_us).algorithm == min(g, key=lambda q: q.predicted_us).algorithm
        for g in groups.values()
    )
    return agree, len(groups)
