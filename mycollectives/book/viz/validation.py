"""Chapter 4's validation table: the markdown of :mod:`mycollectives.sim.validate`'s results.

The computation (the points, the simulated busbw, the errors, the summary)
is :mod:`mycollectives.sim.validate`'s; this page helper only writes it out.
``python -m mycollectives.book.viz.validation`` writes ``chapters/_validation_table.md``.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

from ...sim.validate import TARGETS, Point, points, results, summary


def _size(n: int) -> str:
    return f"{n / (1 << 30):g} GiB" if n >= 1 << 30 else f"{n / (1 << 20):g} MiB"


def _row(p: Point, protocols: bool) -> str:
    r, err = results()[p.id]
    how = r.algorithm + (f"/{r.protocol}" if protocols else "") + ("" if p.model["algorithm"] else "\\*")
    return (f"| {_point(p)} | {_run(p, p.model['size'])} | {how} | {p.busbw:.0f} | {r.busbw:.0f} ({100 * err:+.0f} %) | "
            f"{_source(p)} |")  # fmt: skip


def _point(p: Point) -> str:
    return f"{p.id} ({_SPLIT[p.split]})"


def _run(p: Point, size: int | None = None) -> str:
    """The GPUs, the size where there is one, and the collective where it is not all_reduce (by its prose
    name, reduce-scatter, whose hyphen lets a narrow column break it)."""
    other = [p.collective.replace("_", "-")] if p.collective != "all_reduce" else []
    parts = [p.setup] + ([_size(size)] if size else []) + other
    return ", ".join(parts)


def _source(p: Point) -> str:
    return f"{{cite}}`{p.source}` ({_check(p)})"


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


def _deepep_link(p: Point) -> tuple[str, float]:
    """The link a DeepEP point runs on and its bandwidth (GB/s), as DeepEP's README
    quotes them: NVLink inside a node, one 400 Gb/s CX7 NIC (about 50 GB/s) across."""
    if p.nodes == 1:
        return "NVLink", {"h800": 160.0, "h100": 450.0, "b200": 900.0}[p.gpu]
    return "RDMA", 50.0


def table() -> str:
    """Markdown: the asserted points, the points outside with their reasons, and DeepEP."""
    head = (
        "| Point (split) | Run | Algorithm | Published busbw (GB/s) | Simulated (error) | Source (states) |"
    )
    asserted = [p for p in points() if p.set == "asserted"]
    both = summary("asserted")
    held = ", ".join(f"{k} {100 * TARGETS[k]:.0f} % ({'met' if both[k] <= TARGETS[k] else 'missed'})"
                     for k in ("median", "worst"))  # fmt: skip
    lines = [f"**Asserted set** (targets over all of it: {held}):", ""]
    lines += [f"- {summary_line(name, summary('asserted', split))}." for name, split in _HALVES]
    protocols = {results()[p.id][0].protocol for p in asserted}
    lines += ["", head, "|---|---|---|---|---|---|"] + [_row(p, protocols != {"Simple"}) for p in asserted]
    lines += ["", "\\* NCCL's own pick: the source neither forced nor named the algorithm, so the simulator runs "
              "the one its model of NCCL's tuner picks. The protocol is the tuner's pick on every row"
              + (": Simple." if protocols == {"Simple"} else ".")]  # fmt: skip
    assumed = sorted({a for p in asserted for a in p.model["assumed"]})
    lines += ["", "Assumptions where a source is silent:", ""] + [f"- {a}" for a in assumed]
    lines += ["", "**Outside the asserted set**, with the reason (simulated where the model applies):", "",
              "| Point (split) | Run | Published busbw (GB/s) | Simulated (error) | Why outside | Source (states) |",
              "|---|---|---|---|---|---|"]  # fmt: skip
    for p in (p for p in points() if p.set == "outside"):
        sim = f"{results()[p.id][0].busbw:.0f} ({100 * results()[p.id][1]:+.0f} %)" if p.model else "-"
        lines.append(f"| {_point(p)} | {_run(p)} | {p.busbw:.0f} | {sim} | {p.why_outside} | {_source(p)} |")
    lines += ["", "**DeepEP**, not busbw: its README quotes the links it runs on (H800: about 160 GB/s of NVLink, "
              "one 400 Gb/s CX7 NIC, about 50 GB/s, per GPU); the dispatch and combine kernels' bottleneck "
              "bandwidth against that link:", "",
              "| Point | GPUs | Bottleneck bandwidth (GB/s) | Link | Fraction of the link |", "|---|---|---|---|---|"]  # fmt: skip
    for p in points():
        if p.set != "deepep":
            continue
        link, bw = _deepep_link(p)
        lines.append(f"| {p.id} | {p.setup} | {p.busbw:.0f} | {link}, {bw:.0f} GB/s | {p.busbw / bw:.2f} |")
    return "\n".join(lines) + "\n"


def side_by_side(rows: list[dict]) -> str:
    """The calculator and the virtual cluster on published rows (:func:`mycollectives.virtual.validate.published`'s
    rows): busbw in GB/s, each engine's ratio to the other and to the published value; a row the virtual
    cluster does not run says why."""
    lines = [
        f"{'point':30s} {'split':8s} {'pub':>6s} {'calc':>6s} {'virtual':>7s} {'virt/calc':>9s} {'virt/pub':>8s}"
    ]
    for r in rows:
        head = (f"{r['id'][:30]:30s} {_SPLIT[r['split']]:8s} {r['published_busbw']:6.0f} "
                f"{r['calculator_busbw']:6.0f}")  # fmt: skip
        v = r["virtual_busbw"]
        if v is None:
            lines.append(f"{head} {'-':>7s}  ({_short(r['why'])})")
        else:
            lines.append(
                f"{head} {v:7.0f} {v / r['calculator_busbw'] - 1:+9.1%} {v / r['published_busbw'] - 1:+8.1%}"
            )
    return "\n".join(lines)


def _short(why: str) -> str:
    return why.split(",")[0].split(" (")[0]


def virtual_summary(rows: list[dict]) -> dict[str, float]:
    """Over the rows the virtual cluster ran: its errors against the published values (as
    :func:`~mycollectives.sim.validate.summary` gives the calculator's) and its agreement with the calculator."""
    ran = [r for r in rows if r["virtual_busbw"] is not None]
    signed = [r["virtual_busbw"] / r["published_busbw"] - 1 for r in ran]
    apart = [abs(r["virtual_busbw"] / r["calculator_busbw"] - 1) for r in ran]
    if not ran:
        return {"points": 0, "of": len(rows)}
    return {"points": len(ran), "of": len(rows), "median": statistics.median(map(abs, signed)),
            "worst": max(map(abs, signed)), "signed_median": statistics.median(signed),
            "within_10": sum(a <= 0.10 for a in apart), "apart_worst": max(apart)}  # fmt: skip


if __name__ == "__main__":  # pragma: no cover
    out = sys.argv[1] if len(sys.argv) > 1 else "chapters/_validation_table.md"
    text = table()
    Path(out).write_text(text)
    print(text)
