"""The alpha-beta-gamma model next to the measurement (chapter 3's model, tested).

Two ways to get the model's parameters on the group that ran the sweep:

* :func:`calibrate_group`: ranks 0 and 1 ping-pong (``mycollectives.cost.calibrate``)
  and time a local add, the way chapter 2 does it: nothing about the
  collectives is used;
* :func:`fit_to_sweep`: least squares of the measured collective times on the
  counts each schedule implies (messages, bytes and reduced bytes along its
  rounds), fitted on every other size and judged on the sizes left out.

:func:`compare` predicts every (algorithm, size) point of a sweep and gives
the relative error; its median is the number the book reports.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from .. import auto
from ..algorithms import build
from ..cost import Machine, counted_cost, round_load, spec_for
from .cases import NATIVE
from .factors import DTYPES
from .runner import Result


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


def schedule_of(r: Result, machine: Machine | None = None):
    """The schedule a result ran (``auto`` resolved as the API resolves it)."""
    item = _itemsize(r.type)
    nbytes = _block_bytes(r)
    name = auto.choose(r.collective, r.world_size, nbytes) if r.algorithm == "auto" else r.algorithm
    spec = spec_for(r.collective, r.world_size, nbytes, item)
    if name in ("chain", "double_binary_tree"):  # the API's default segment
        from ..api.core import DEFAULT_SEGMENT_BYTES

        spec = spec_for(r.collective, r.world_size, nbytes, item, segment=DEFAULT_SEGMENT_BYTES // item)
    return build(spec, name)


def _itemsize(type_name: str) -> int:
    import torch

    return torch.empty(0, dtype=DTYPES.get(type_name, torch.float32)).element_size()


def _block_bytes(r: Result) -> int:
    """The bytes :func:`spec_for` expects: one rank's block where the collective splits."""
    if r.collective in ("all_gather", "reduce_scatter", "scatter", "gather"):
        return r.size // r.world_size
    return r.size


def _loads(rnd, p: int, item: int, duplex: bool, segment_bytes: int | None = None) -> np.ndarray:
    """Per rank ``(messages, bytes, reduced bytes)`` of one round; bytes are
    ``max(sent, received)`` on a full-duplex link, their sum otherwise.

    ``segment_bytes``: the transport's cap on one message (gloo's
    ``max_message_bytes``): a reduced transfer longer than that travels as
    several messages, and each costs its ``alpha``.
    """
    if duplex and not segment_bytes:
        load = round_load(rnd, p, item)
        return np.stack([load.messages, load.nbytes, load.reduced], axis=1)
    remote = rnd.src != rnd.dst
    src, dst, nb = rnd.src[remote], rnd.dst[remote], rnd.count[remote] * item
    key = src * p + dst
    pair, inv = np.unique(key, return_inverse=True)
    pair_bytes = np.bincount(inv, weights=nb, minlength=len(pair))
    pair_reduces = np.bincount(inv, weights=rnd.reduce[remote], minlength=len(pair)) > 0
    per_pair = np.ones(len(pair))
    if segment_bytes:
        cut = pair_reduces & (pair_bytes > segment_bytes)
        per_pair[cut] = np.ceil(pair_bytes[cut] / segment_bytes)
    msgs = np.maximum(
        np.bincount(pair // p, weights=per_pair, minlength=p),
        np.bincount(pair % p, weights=per_pair, minlength=p),
    )
    sent = np.bincount(src, weights=nb, minlength=p)
    recv = np.bincount(dst, weights=nb, minlength=p)
    moved = np.maximum(sent, recv) if duplex else sent + recv
    red = np.bincount(dst, weights=nb * rnd.reduce[remote], minlength=p)
    return np.stack([msgs, moved, red], axis=1)


@dataclass(frozen=True)
class Conditions:
    """How the model charges a round, beyond alpha, beta and gamma.

    The defaults are chapter 3's textbook model (:func:`counted_cost`): full
    duplex links, a core per rank, messages never cut.

    * ``duplex=False`` charges a rank for the bytes it sends *and* receives:
      on CPUs over loopback TCP both directions cost the same cores' memory
      copies, so a link is not full duplex there.
    * ``cores``: when the ranks share fewer cores than there are ranks (local
      gloo processes on a small machine), a round also lasts at least its
      total work divided by the cores, since every byte is copied by one of
      them; the round is charged the larger of the two.
    * ``segment_bytes``: the transport's cap on one message (gloo's
      ``max_message_bytes``); each cut segment costs its own alpha.
    """

    duplex: bool = True
    cores: int | None = None
    segment_bytes: int | None = None

    @classmethod
    def from_meta(cls, meta: dict) -> Conditions:
        """Local gloo processes as a recorded sweep's ``meta`` describes them:
        no full duplex, the machine's cores, the message cap it ran with."""
        return cls(duplex=False, cores=meta.get("cores"), segment_bytes=meta.get("max_message_bytes"))


TEXTBOOK = Conditions()


def features(r: Result, machine: Machine, cond: Conditions = TEXTBOOK) -> np.ndarray:
    """``(messages, bytes, reduced bytes)`` summed over rounds, each round
    counted at its busiest rank under ``machine`` (as :func:`counted_cost`
    does), or at the shared cores (see :class:`Conditions`)."""
    s = schedule_of(r)
    item = _itemsize(r.type)
    total = np.zeros(3)
    weights = np.array([machine.alpha, machine.beta, machine.gamma])
    shared = cond.cores is not None and cond.cores < s.world_size
    for rnd in s.rounds:
        f = _loads(rnd, s.world_size, item, cond.duplex, cond.segment_bytes)
        if shared:
            f = np.vstack([f, f.sum(axis=0) / cond.cores])
        total += f[int(np.argmax(f @ weights))]
    return total


def predict_us(r: Result, machine: Machine, cond: Conditions = TEXTBOOK) -> float:
    """The model's time of the schedule behind ``r``, in microseconds (under
    the textbook conditions, chapter 3's :func:`~mycollectives.cost.counted_cost`)."""
    if cond == TEXTBOOK:
        return counted_cost(schedule_of(r), machine, _itemsize(r.type)) * 1e6
    f = features(r, machine, cond)
    return float(f @ [machine.alpha, machine.beta, machine.gamma]) * 1e6


def measured_us(r: Result, stat: str = "median") -> float:
    """A point's measured time: the median over repetitions, or ``"min"``, the
    least disturbed repetition (what a model of an idle machine predicts)."""
    return min(r.times_us) if stat == "min" and r.times_us else r.time_us


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
    from :func:`features`; points are weighted by ``1/time`` (relative error
    counts), and a parameter that comes out negative is dropped and the rest
    refitted. ``train(result) -> bool`` picks the points fitted on.
    """
    pts = [r for r in modelled(results, min_bytes) if train is None or train(r)]
    if not pts:
        raise ValueError("no points to fit")
    t = np.array([measured_us(r, stat) * 1e-6 for r in pts])
    w = 1.0 / t
    machine = start
    # which rank (or the shared cores) binds each round depends on the
    # parameters: refit until the choice settles
    for _ in range(5):
        x = np.array([features(r, machine, cond) for r in pts])
        keep = [0, 1, 2]
        while True:
            coef, *_ = np.linalg.lstsq(x[:, keep] * w[:, None], t * w, rcond=None)
            if (coef >= 0).all() or len(keep) == 1:
                break
            keep.pop(int(np.argmin(coef)))
        full = np.zeros(3)
        full[keep] = np.maximum(coef, 0.0)
        fitted = Machine(alpha=float(full[0]), beta=float(full[1]), gamma=float(full[2]))
        if fitted == machine:
            break
        machine = fitted
    return machine


def every_other_size(results: Sequence[Result]):
    """A train/test split: sizes at even positions of the sweep train, odd ones test."""
    order = {n: i for i, n in enumerate(sorted({r.size for r in results}))}
    return lambda r: order[r.size] % 2 == 0


def fit_held_out(meta: dict, results: Sequence[Result], stat: str = "min") -> tuple[Machine, list[Point]]:
    """The book's fit of a recorded sweep: from its ping-pong calibration,
    under the conditions its ``meta`` records, on every other size; returns
    the fitted machine and the predicted points of the sizes left out."""
    cond = Conditions.from_meta(meta)
    train = every_other_size(results)
    fitted = fit_to_sweep(results, Machine(**meta["calibration"]), train=train, cond=cond, stat=stat)
    return fitted, compare([r for r in results if not train(r)], fitted, cond=cond, stat=stat)


def calibrate_group(group=None, device=None, max_bytes: int = 64 << 20) -> Machine:
    """Chapter 2's calibration on this group (call on every rank), ping-pong
    messages from 4 bytes up to ``max_bytes`` (at least 64 KiB)."""
    from ..cost import calibrate

    sizes = [4 << k for k in range(0, 40, 2) if 4 << k <= max(max_bytes, 64 << 10)]
    return calibrate(group, sizes=sizes, reps=3, device=device).machine
