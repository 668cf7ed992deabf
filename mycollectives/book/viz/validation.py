"""Chapter 4's validation table: the markdown of :mod:`mycollectives.sim.validate`'s results.

The computation (the points, the simulated busbw, the errors, the summary)
is :mod:`mycollectives.sim.validate`'s; this page helper only writes it out.
``python -m mycollectives.book.viz.validation`` writes ``chapters/_validation_table.md``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ...sim.validate import TARGETS, Point, deepep_link, points, results, summary


def _size(n: int) -> str:
    return f"{n / (1 << 30):g} GiB" if n >= 1 << 30 else f"{n / (1 << 20):g} MiB"


def _row(p: Point) -> str:
    r, err = results()[p.id]
    m = p.model
    how = f"{r.algorithm}/{r.protocol}" + ("" if m["algorithm"] else " (NCCL's pick)")
    return (f"| {p.id} | {_SPLIT[p.split]} | {p.collective} | {p.setup} | {_size(m['size'])} | {how} | "
            f"{p.busbw:.0f} | {r.busbw:.0f} | {100 * err:+.0f} % | {_check(p)} | {{cite}}`{p.source}` |")  # fmt: skip


_SPLIT = {"fit": "fit", "held_out": "held out"}


def summary_line(name: str, s: dict) -> str:
    """One set's errors: median |error|, worst, signed median, and how many above and below."""
    return (f"{name}: {s['points']} points; median |error| {100 * s['median']:.1f} %, worst "
            f"{100 * s['worst']:.1f} %, signed median {100 * s['signed_median']:+.1f} %; "
            f"{s['above']} simulated above the published value, {s['below']} below")  # fmt: skip


def _check(p: Point) -> str:
    """Whether the source states what the row records (``source_check``), as the table shows it."""
    return p.raw["source_check"]["status"]


_HALVES = (("fit", "fit"), ("held out", "held_out"), ("both", None))


def table() -> str:
    """Markdown: the asserted points, the points outside with their reasons, and DeepEP."""
    head = ("| Point | Split | Collective | GPUs | Size | Algorithm | Published busbw (GB/s) | Simulated | Error "
            "| Source states | Source |\n|---|---|---|---|---|---|---|---|---|---|---|")  # fmt: skip
    asserted = [p for p in points() if p.set == "asserted"]
    lines = [f"**Asserted set** (targets over all of it: median {100 * TARGETS['median']:.0f} %, worst "
             f"{100 * TARGETS['worst']:.0f} %):", ""]  # fmt: skip
    lines += [f"- {summary_line(name, summary('asserted', split))}." for name, split in _HALVES]
    lines += ["", head] + [_row(p) for p in asserted]
    assumed = sorted({a for p in asserted for a in p.model["assumed"]})
    lines += ["", "Assumptions where a source is silent:", ""] + [f"- {a}" for a in assumed]
    outside = [p for p in points() if p.set == "outside"]
    lines += ["", "**Outside the asserted set**, with the reason (simulated where the model applies):", "",
              "| Point | Split | Collective | GPUs | Published busbw (GB/s) | Simulated | Error | Why outside "
              "| Source states | Source |", "|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for p in outside:
        sim = f"{results()[p.id][0].busbw:.0f} | {100 * results()[p.id][1]:+.0f} %" if p.model else "- | -"
        lines.append(f"| {p.id} | {_SPLIT[p.split]} | {p.collective} | {p.setup} | {p.busbw:.0f} | {sim} | {p.why_outside} | "
                     f"{_check(p)} | {{cite}}`{p.source}` |")  # fmt: skip
    lines += ["", "**DeepEP**, not busbw: its README quotes the links it runs on (H800: about 160 GB/s of NVLink, "
              "one 400 Gb/s CX7 NIC, about 50 GB/s, per GPU); the dispatch and combine kernels' bottleneck "
              "bandwidth against that link:", "",
              "| Point | GPUs | Bottleneck bandwidth (GB/s) | Link | Fraction of the link |", "|---|---|---|---|---|"]  # fmt: skip
    for p in points():
        if p.set != "deepep":
            continue
        link, bw = deepep_link(p)
        lines.append(f"| {p.id} | {p.setup} | {p.busbw:.0f} | {link}, {bw:.0f} GB/s | {p.busbw / bw:.2f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # pragma: no cover
    out = sys.argv[1] if len(sys.argv) > 1 else "chapters/_validation_table.md"
    text = table()
    Path(out).write_text(text)
    print(text)
