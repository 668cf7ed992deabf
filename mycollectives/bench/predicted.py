"""Predicted against measured, for a recorded sweep: the model's report card.

``python -m mycollectives.bench.predicted SWEEP.json [...]`` reads sweeps that
``python -m mycollectives.bench ... --calibrate 1 --json SWEEP.json`` wrote,
fits alpha, beta and gamma (and what the conditions add) on every other size (:func:`model.fit_held_out`,
under the conditions the sweep's machine records) and prints, for every
algorithm and size from 64 KiB up, the measured and the predicted time; the
sizes the fit saw are marked. The summary line is the median relative error
on the sizes it did not see, the number the book's benchmark page reports.
The bench prints the same report at the end of a ``--calibrate 1`` run.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from . import model
from .report import read_json, time_str
from .runner import Result


def report(meta: dict, results: Sequence[Result], stat: str = "quiet") -> str:
    """The fitted machine, one line per (size, algorithm), the median errors."""
    fitted, held = model.fit_held_out(meta, results, stat=stat)
    cond = model.Conditions.from_meta(meta)
    points = model.compare(results, fitted, cond=cond, stat=stat)
    unseen = {(q.algorithm, q.size) for q in held}
    r0 = results[0]
    # every line a comment: parsers of nccl-tests' table (parse_table) skip them
    lines = [
        f"# model: {r0.collective}, {r0.world_size} ranks, transport {meta.get('transport', 'group')}, "
        f"measured = {stat} (see mycollectives.bench.model.measured_us)",
        f"# fitted on every other size: {model.describe(fitted, cond)}",
        f"# {'size':>10s}  {'algorithm':>20s}  {'measured':>9s}  {'predicted':>9s}  {'error':>6s}",
    ]
    for q in sorted(points, key=lambda q: (q.size, q.algorithm)):
        seen = "" if (q.algorithm, q.size) in unseen else "  (fitted on)"
        lines.append(
            f"# {q.size:10d}  {q.algorithm:>20s}  {time_str(q.measured_us):>9s}  "
            f"{time_str(q.predicted_us):>9s}  {100 * q.rel_error:5.1f}%{seen}"
        )
    lines.append(
        f"# median relative error: {100 * model.median_error(held):.1f} % on the {len(held)} points of "
        f"sizes the fit did not see ({100 * model.median_error(points):.1f} % on all {len(points)})"
    )
    seen_sizes = len({q.size for q in points} - {q.size for q in held})
    k = len(model.params(fitted, cond))
    if seen_sizes < k:
        lines.append(
            f"# the fit saw {seen_sizes} sizes for the model's {k} parameters: the held-out error judges "
            "the parameters as much as the model; more sizes (-f 2, a wider -b/-e) give the fit more to go on"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog="python -m mycollectives.bench.predicted", description=__doc__.splitlines()[0]
    )
    p.add_argument("sweeps", nargs="+", help="JSON files written by the bench with --calibrate 1")
    p.add_argument(
        "--stat",
        default="quiet",
        choices=("quiet", "min", "median"),
        help="which measured time: the lower quartile of single calls (default), the least "
        "disturbed repetition, or the median repetition (the table's time)",
    )
    args = p.parse_args(argv)
    for i, path in enumerate(args.sweeps):
        meta, results = read_json(path)
        if "calibration" not in meta:
            raise SystemExit(f"{path}: no calibration in the sweep's machine; record it with --calibrate 1")
        print(("\n" if i else "") + f"# {path}")
        print(report(meta, results, args.stat))


if __name__ == "__main__":
    main()
