"""The alpha-beta-gamma model next to the measurement (chapter 3's model, tested).

What the model charges a schedule is in :mod:`~mycollectives.bench.charge`;
this module holds the measured side and the fit. Two ways to get the model's
parameters on the group that ran the sweep:

* :func:`calibrate_group`: ranks 0 and 1 ping-pong (``mycollectives.cost.calibrate``)
  and time a local add, the way chapter 2 does it: nothing about the
  collectives is used;
* :func:`fit_to_sweep`: least squares of the measured collective times on the
  counts each schedule implies (messages, bytes and reduced bytes along its
  rounds), fitted on every other size and judged on the sizes left out.

:func:`compare` predicts every (algorithm, size) point of a sweep and gives
the relative error; its median is the number the book reports.
``python -m mycollectives.bench.predicted SWEEP.json`` prints it all for a
recorded sweep.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from ..cost import Machine
from .cases import NATIVE
from .charge import (
    TEXTBOOK,
    Conditions,
    CpuMachine,
    describe,
    features,
    machine_of,
    params,
    predict_us,
    schedule_of,
)
from .runner import Result

__all__ = [  # what the model counts comes from .charge; the fit and the measurement are here
    "Conditions", "TEXTBOOK", "CpuMachine", "describe", "features", "predict_us", "schedule_of", "Point", "QUIET",
    "measured_us", "modelled", "compare", "median_error", "fit_to_sweep", "every_other_size",
    "fit_held_out", "calibrate_group",
]  # fmt: skip


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


QUIET = 0.25  # the quantile of single calls that "quiet" reads


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
                f"{r.collective}/{r.algorithm} at {r.size} B has no single-call times (calls_us): "
                "record it with this version of the bench, or use stat='min'"
            )
        return float(np.quantile(r.calls_us, QUIET))
    if stat == "min":
        return min(r.times_us) if r.times_us else r.time_us
    if stat != "median":
        raise ValueError(f"stat: expected 'median', 'min' or 'quiet', got {stat!r}")
    return r.time_us


def modelled(results: Sequence[Result], min_bytes: int = 64 << 10) -> list[Result]:
    """The points the model speaks for: ours (not native), from ``min_bytes`` up."""
    return [r for r in results if r.algorithm != NATIVE and r.size >= min_bytes and r.time_us > 0]


def compare(
    results: Sequence[Result],
    machine: Machine,
    min_bytes: int = 64 << 10,
    cond: Conditions = TEXTBOOK,
    stat: str = "median",
) -> list[Point]:
    """Predicted against measured for every algorithm and size from ``min_bytes`` up."""
    return [
        Point(
            r.collective,
            r.algorithm,
            r.size,
            r.world_size,
            measured_us(r, stat),
            predict_us(r, machine, cond),
        )
        for r in modelled(results, min_bytes)
    ]


def median_error(points: Sequence[Point]) -> float:
    return statistics.median(p.rel_error for p in points) if points else float("nan")


def fit_to_sweep(
    results: Sequence[Result],
    start: Machine,
    min_bytes: int = 64 << 10,
    train=None,
    cond: Conditions = TEXTBOOK,
    stat: str = "median",
) -> Machine:
    """Least-squares alpha, beta, gamma from the collectives' own times.

    Each point says ``time = alpha m + beta b + gamma g`` with ``(m, b, g)``
    from :func:`features`, plus the terms that ``cond`` adds (a second
    alpha, a round latency, beta and gamma out of cache: :class:`CpuMachine`);
    points are weighted by
    ``1/time`` (relative error counts), and a parameter that comes out
    negative is dropped and the rest refitted. ``train(result) -> bool``
    picks the points fitted on.
    """
    pts = [r for r in modelled(results, min_bytes) if train is None or train(r)]
    if len({r.size for r in pts}) < 2:  # one size cannot tell a message's cost from a byte's
        raise ValueError(f"the fit needs points of at least two sizes from {min_bytes} bytes up")
    t = np.array([measured_us(r, stat) * 1e-6 for r in pts])
    w = 1.0 / t
    machine = start
    # which rank (or the shared cores) binds each round depends on the
    # parameters: refit until the choice settles
    k = len(params(start, cond))
    for _ in range(5):
        x = np.array([features(r, machine, cond) for r in pts])
        keep = list(range(k))
        while True:
            coef, *_ = np.linalg.lstsq(x[:, keep] * w[:, None], t * w, rcond=None)
            if (coef >= 0).all() or len(keep) == 1:
                break
            keep.pop(int(np.argmin(coef)))
        full = np.zeros(k)
        full[keep] = np.maximum(coef, 0.0)
        fitted = machine_of(full, cond)
        if fitted == machine:
            break
        machine = fitted
    return machine


def every_other_size(results: Sequence[Result]):
    """A train/test split: sizes at even positions of ``results`` train, odd ones test."""
    order = {n: i for i, n in enumerate(sorted({r.size for r in results}))}
    return lambda r: order[r.size] % 2 == 0


def fit_held_out(
    meta: dict, results: Sequence[Result], stat: str = "quiet", cond: Conditions | None = None
) -> tuple[Machine, list[Point]]:
    """The book's fit of a recorded sweep: from its ping-pong calibration,
    under the conditions its ``meta`` records (or ``cond``), on every other
    size; returns the fitted machine and the predicted points of the sizes
    left out."""
    cond = Conditions.from_meta(meta) if cond is None else cond
    train = every_other_size(modelled(results))  # of the sizes the model speaks for
    fitted = fit_to_sweep(results, Machine(**meta["calibration"]), train=train, cond=cond, stat=stat)
    return fitted, compare([r for r in modelled(results) if not train(r)], fitted, cond=cond, stat=stat)


def calibrate_group(group=None, device=None, max_bytes: int = 64 << 20) -> Machine:
    """Chapter 2's calibration on this group (call on every rank), ping-pong
    messages from 4 bytes up to ``max_bytes`` (at least 64 KiB)."""
    from ..cost import calibrate

    sizes = [4 << k for k in range(0, 40, 2) if 4 << k <= max(max_bytes, 64 << 10)]
    return calibrate(group, sizes=sizes, reps=3, device=device).machine
