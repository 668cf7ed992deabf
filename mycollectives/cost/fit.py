"""Fitting a cost model's parameters to measured collectives (chapter 3b, the benchmarks page).

A model counts, for each round of a schedule, what every rank does: one row
of counts per rank, one column per parameter (``alpha`` counts messages,
``beta`` bytes, ...). A round lasts as long as its busiest row, ``row @ params``,
and a schedule the sum of its rounds, as in :func:`~mycollectives.cost.counted_cost`.
Once the busiest rows are known a call's time is linear in the parameters,
so :func:`fit` solves least squares on the measured times, then counts again
with the new parameters until the busiest rows stop changing.

Three models: :class:`Textbook`, chapter 3's (full-duplex links, a core per
rank), ``Launched``, the same with a latency paid once per call (GPUs
under NCCL), and :class:`~.cpu.CpuModel`, for CPU processes that
share a machine.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from ..schedule import Schedule
from .counted import Machine, round_load

UNITS = {"alpha": (1e6, "us", 1), "latency": (1e6, "us", 1)}  # the rest: seconds per byte, shown in ns/B


@dataclass(frozen=True)
class Textbook:
    """Chapter 3's model: ``alpha`` per message, ``beta`` per byte on full-duplex
    links (a rank's larger direction counts), ``gamma`` per byte reduced."""

    names: tuple[str, ...] = ("alpha", "beta", "gamma")

    def rows(self, schedule: Schedule, itemsize: int) -> Iterator[np.ndarray]:
        for rnd in schedule.rounds:
            load = round_load(rnd, schedule.world_size, itemsize)
            yield np.stack([load.messages, load.nbytes, load.reduced], axis=1).astype(float)

    def start(self, machine: Machine) -> np.ndarray:
        """Parameters to start a fit from, given a ping-pong calibration."""
        return np.array([machine.alpha, machine.beta, machine.gamma])


@dataclass(frozen=True)
class Launched(Textbook):
    """A ``latency`` paid once per call, NCCL's base latency (launching the
    kernel, setting up the channels), then ``alpha`` per round in which a rank
    sends (its messages leave together, on their own links: one step
    latency), ``beta`` and ``gamma`` as in the textbook model (chapter 2).
    This is how NCCL's tuner prices an algorithm, and what the virtual
    cluster charges."""

    names: tuple[str, ...] = ("latency", "alpha", "beta", "gamma")

    def rows(self, schedule: Schedule, itemsize: int) -> Iterator[np.ndarray]:
        yield np.array([[1.0, 0.0, 0.0, 0.0]])
        for rnd in schedule.rounds:  # a rank posts a round's messages at once: one step latency
            load = round_load(rnd, schedule.world_size, itemsize)
            busy = (load.messages > 0).astype(float)
            yield np.stack([np.zeros_like(busy), busy, load.nbytes, load.reduced], axis=1)

    def start(self, machine: Machine) -> np.ndarray:
        return np.array([machine.alpha / 2, machine.alpha / 2, machine.beta, machine.gamma])


def counts(model, schedule: Schedule, params, itemsize: int = 4) -> np.ndarray:
    """The schedule's counts, each round's taken at its busiest row under ``params``."""
    total = np.zeros(len(model.names))
    params = np.asarray(params, dtype=float)
    for f in model.rows(schedule, itemsize):
        if f.any():
            total += f[int(np.argmax(f @ params))]
    return total


def model_time(model, schedule: Schedule, params, itemsize: int = 4) -> float:
    """Seconds the model gives ``schedule`` under ``params``."""
    return float(counts(model, schedule, params, itemsize) @ np.asarray(params, dtype=float))


def fit(model, points: Sequence[tuple[Schedule, float]], start, itemsize: int = 4) -> np.ndarray:
    """Least-squares parameters from ``(schedule, seconds)`` points.

    Points are weighted by ``1/time`` (relative errors count); a parameter
    that comes out negative is dropped and the rest refitted. The fit needs
    calls of at least two sizes: within one size, messages and bytes grow
    together and cannot be told apart.
    """
    if not points:
        raise ValueError("the fit needs measured points")
    t = np.array([s for _, s in points])
    w = 1.0 / t
    params = np.asarray(start, dtype=float)
    k = len(params)
    for _ in range(5):  # which row binds each round depends on the parameters
        x = np.array([counts(model, sched, params, itemsize) for sched, _ in points])
        keep = list(range(k))
        while True:
            coef, *_ = np.linalg.lstsq(x[:, keep] * w[:, None], t * w, rcond=None)
            if (coef >= 0).all() or len(keep) == 1:
                break
            keep.pop(int(np.argmin(coef)))
        fitted = np.zeros(k)
        fitted[keep] = np.maximum(coef, 0.0)
        if np.allclose(fitted, params, rtol=1e-12, atol=0):
            break
        params = fitted
    return params


def describe(model, params) -> str:
    """The parameters in readable units: ``alpha 50.0 us, beta 1.0000 ns/B, ...``."""
    parts = []
    for name, v in zip(model.names, params):
        scale, unit, digits = UNITS.get(name, (1e9, "ns/B", 4))
        parts.append(f"{name} {v * scale:.{digits}f} {unit}")
    return ", ".join(parts)
