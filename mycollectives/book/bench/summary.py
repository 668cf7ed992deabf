"""Reading recorded sweeps back: ratios against the native collective.

Used by the book's benchmark page and lab 3, so that every number they show
is computed from the files under ``benchmarks/results/``.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence

from ...bench.cases import NATIVE
from ...bench.report import read_json
from ...bench.runner import Result


def load(directory: str) -> dict[tuple[str, int], tuple[dict, list[Result]]]:
    """Every JSON sweep in ``directory``, keyed by ``(collective, world_size)``."""
    out = {}
    for path in sorted(glob.glob(os.path.join(directory, "*.json"))):
        meta, results = read_json(path)
        if results:
            out[(results[0].collective, results[0].world_size)] = (meta, results)
    return out


def best_ours(results: Sequence[Result], size: int) -> Result | None:
    """Our fastest algorithm at ``size`` (``auto`` included)."""
    ours = [r for r in results if r.size == size and r.algorithm != NATIVE]
    return max(ours, key=lambda r: r.busbw) if ours else None


def native(results: Sequence[Result], size: int) -> Result | None:
    return next((r for r in results if r.size == size and r.algorithm == NATIVE), None)


def ratio_rows(data, sizes: Sequence[int]) -> list[dict]:
    """Per (collective, world size, size): our best busbw over the native one."""
    rows = []
    for (coll, p), (meta, results) in sorted(data.items()):
        for n in sizes:
            b, nat = best_ours(results, n), native(results, n)
            if b is None:
                continue
            rows.append(
                {
                    "collective": coll,
                    "world_size": p,
                    "size": n,
                    "best": b.algorithm,
                    "best_busbw": b.busbw,
                    "native_busbw": nat.busbw if nat else None,
                    "ratio": b.busbw / nat.busbw if nat and nat.busbw else None,
                    "loadavg": meta.get("loadavg"),
                }
            )
    return rows


def describe_machine(meta: dict) -> str:
    """Two lines: what a recording ran on (processor, cores), and with what software, when."""
    when = str(meta.get("date_utc", "?"))[:10]
    return (
        f"{meta.get('cpu', '?')}, {meta.get('cores', '?')} cores;\n"
        f"torch {meta.get('torch', '?')}, {meta.get('backend', '?')} with the "
        f"{meta.get('transport', '?')} transport, recorded {when}"
    )


def wrong_total(data) -> int:
    """Wrong elements over every checked point of every sweep."""
    return sum(r.wrong or 0 for _, results in data.values() for r in results)
