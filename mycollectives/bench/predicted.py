"""Predicted against measured, for a sweep: the cost model's report card.

``python -m mycollectives.bench.predicted SWEEP.json [...]`` reads sweeps that
``python -m mycollectives.bench ... --calibrate 1 --json SWEEP.json`` wrote.
For every point of ours from 64 KiB up it takes the schedule that ran (the
one way, :func:`~mycollectives.algorithms.schedule_for`, with ``auto``
resolved as the API resolves it), fits the model's parameters on every other
size (:func:`fit_held_out`: the textbook model for GPUs under NCCL, the CPU
model for processes sharing a machine, :mod:`mycollectives.cost.cpu`) and
prints measured against predicted time; the sizes the fit saw are marked.
The summary line is the median relative error on the sizes it did not see.
The bench prints the same report at the end of a ``--calibrate 1`` run.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import torch

from .. import auto
from ..algorithms import schedule_for
from ..cost import Machine
from ..cost.cpu import CpuModel
from ..cost.fit import Textbook, describe, fit, model_time
from .cases import NATIVE
from .factors import DTYPES
from .report import read_json, time_str
from .runner import Result

QUIET = 0.25  # the quantile of single calls that "quiet" reads
MIN_BYTES = 64 << 10  # below this, a call is mostly the Python around it, not its schedule


@dataclass
class Point:
    """One algorithm at one size: measured and predicted microseconds."""

    collective: str
    algorithm: str
    size: int
    world_size: int
    measured_us: float
    predicted_us: float

    @property
    def rel_error(self) -> float:
        return abs(self.predicted_us - self.measured_us) / self.measured_us

    def asdict(self) -> dict:
        return {**asdict(self), "rel_error": self.rel_error}


def measured_us(r: Result, stat: str = "median") -> float:
    """A point's measured time.

    * ``"median"``: the median over repetitions, the bench's table;
    * ``"min"``: the least disturbed repetition;
    * ``"quiet"``: the lower quartile of single calls (``Result.calls_us``).
      The model describes a call that the operating system leaves alone;
      on a machine with more threads than cores, some calls wait a whole
      scheduler tick for a core, and a repetition's mean carries every such
      wait of its calls, while the quietest quarter of the calls does not.
    """
    if stat == "quiet":
        if not r.calls_us:
            raise ValueError(
                f"{r.collective}/{r.algorithm} at {r.size} B has no single-call times (calls_us)"
            )
        return float(np.quantile(r.calls_us, QUIET))
    if stat == "min":
        return min(r.times_us) if r.times_us else r.time_us
    if stat != "median":
        raise ValueError(f"stat: expected 'median', 'min' or 'quiet', got {stat!r}")
    return r.time_us


def itemsize(r: Result) -> int:
    return torch.empty(0, dtype=DTYPES.get(r.type, torch.float32)).element_size()


def schedule_of(r: Result):
    """The schedule a result ran (``auto`` resolved as the API resolves it)."""
    item = itemsize(r)
    name = (
        auto.choose(r.collective, r.world_size, r.size, itemsize=item)
        if r.algorithm == "auto"
        else r.algorithm
    )
    return schedule_for(r.collective, name, r.world_size, r.size, item)


def model_for(meta: dict, results: Sequence[Result] = ()):
    """The textbook model for GPUs under NCCL (each GPU has its own engines, its
    links are full duplex); the CPU model, with the recorded machine's cores
    and last-level cache, for CPU processes. The cache's terms are left out
    when no call of ``results`` outgrows it: nothing could tell their values."""
    if meta.get("backend") == "nccl":
        return Textbook()
    llc = meta.get("llc_bytes")
    if results and llc and not any(r.world_size * r.size >= llc for r in modelled(results)):
        llc = None
    return CpuModel(cores=meta.get("cores"), cache_bytes=llc)


def modelled(results: Sequence[Result], min_bytes: int = MIN_BYTES) -> list[Result]:
    """The points the model speaks for: ours (not native), from ``min_bytes`` up."""
    return [r for r in results if r.algorithm != NATIVE and r.size >= min_bytes and r.time_us > 0]


def predicted_us(r: Result, model, params) -> float:
    """The model's time of the schedule behind ``r``, in microseconds."""
    return model_time(model, schedule_of(r), params, itemsize(r)) * 1e6


def compare(
    results: Sequence[Result], model, params, stat: str = "median", min_bytes: int = MIN_BYTES
) -> list[Point]:
    """Predicted against measured for every point the model speaks for."""
    return [
        Point(
            r.collective,
            r.algorithm,
            r.size,
            r.world_size,
            measured_us(r, stat),
            predicted_us(r, model, params),
        )
        for r in modelled(results, min_bytes)
    ]


def median_error(points: Sequence[Point]) -> float:
    return statistics.median(p.rel_error for p in points) if points else float("nan")


def fit_results(
    results: Sequence[Result], model, start, stat: str = "median", min_bytes: int = MIN_BYTES
) -> np.ndarray:
    """The model's parameters fitted to the measured times of ``results`` (those
    from ``min_bytes`` up)."""
    pts = modelled(results, min_bytes)
    if len({r.size for r in pts}) < 2:
        raise ValueError(f"the fit needs points of at least two sizes from {min_bytes} bytes up")
    return fit(model, [(schedule_of(r), measured_us(r, stat) * 1e-6) for r in pts], start, itemsize(pts[0]))


def every_other_size(results: Sequence[Result]):
    """A train/test split: sizes at even positions train, odd ones test."""
    order = {n: i for i, n in enumerate(sorted({r.size for r in results}))}
    return lambda r: order[r.size] % 2 == 0


def fit_held_out(meta: dict, results: Sequence[Result], stat: str = "quiet"):
    """The fit of a recorded sweep: from its ping-pong calibration, with the
    model its machine calls for, on every other size; returns the model, the
    fitted parameters and the predicted points of the sizes left out."""
    model = model_for(meta, results)
    train = every_other_size(modelled(results))
    start = model.start(Machine(**meta["calibration"]))
    params = fit_results([r for r in modelled(results) if train(r)], model, start, stat)
    return model, params, compare([r for r in modelled(results) if not train(r)], model, params, stat)


def report(meta: dict, results: Sequence[Result], stat: str = "quiet") -> str:
    """The fitted parameters, one line per (size, algorithm), the median errors."""
    model, params, held = fit_held_out(meta, results, stat=stat)
    points = compare(results, model, params, stat=stat)
    unseen = {(q.algorithm, q.size) for q in held}
    r0 = results[0]
    # every line a comment: parsers of nccl-tests' table (parse_table) skip them
    lines = [
        f"# model: {r0.collective}, {r0.world_size} ranks, transport {meta.get('transport', 'group')}, "
        f"measured = {stat} (see mycollectives.bench.predicted.measured_us)",
        f"# fitted on every other size: {describe(model, params)}",
        f"# {'size':>10s}  {'algorithm':>20s}  {'measured':>9s}  {'predicted':>9s}  {'error':>6s}",
    ]
    for q in sorted(points, key=lambda q: (q.size, q.algorithm)):
        seen = "" if (q.algorithm, q.size) in unseen else "  (fitted on)"
        lines.append(
            f"# {q.size:10d}  {q.algorithm:>20s}  {time_str(q.measured_us):>9s}  "
            f"{time_str(q.predicted_us):>9s}  {100 * q.rel_error:5.1f}%{seen}"
        )
    lines.append(
        f"# median relative error: {100 * median_error(held):.1f} % on the {len(held)} points of "
        f"sizes the fit did not see ({100 * median_error(points):.1f} % on all {len(points)})"
    )
    seen_sizes = len({q.size for q in points} - {q.size for q in held})
    if seen_sizes < len(params):
        lines.append(
            f"# the fit saw {seen_sizes} sizes for the model's {len(params)} parameters: the held-out error "
            "judges the parameters as much as the model; more sizes (-f 2, a wider -b/-e) give the fit more to go on"
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
