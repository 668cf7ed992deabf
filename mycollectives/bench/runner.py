"""Warm-up, timing and checking, with the algorithms interleaved.

For every size, each *repetition* runs every algorithm (ours and
``"native"``) for ``iters`` back-to-back calls, in a rotated order, and
records the time per call; the reported time is the median over
repetitions. Interleaving keeps the ratio between two algorithms honest on a
machine whose load drifts: each repetition sees them under the same load.
Like nccl-tests, a rank's time is that of its slowest peer (the ranks agree
on the maximum).

Each call is also timed on its own (``Result.calls_us``: host clocks on a
CPU, CUDA events on a GPU, so NCCL's calls stay asynchronous). A repetition's
mean carries every delay the operating system adds to any of its calls (on
a small machine a woken thread can wait a whole scheduler tick, milliseconds,
for a core); the calls that no such delay hit are what a model of the
schedule alone can predict (:mod:`mycollectives.bench.predicted`).
"""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import asdict, dataclass, field

import torch
import torch.distributed as dist

from .cases import NATIVE, Case
from .factors import TYPE_NAMES, bandwidths


@dataclass
class Result:
    """One (size, algorithm) point of a sweep."""

    collective: str
    algorithm: str
    size: int  # bytes, nccl-tests' meaning
    count: int  # elements
    type: str
    redop: str
    root: int
    world_size: int
    time_us: float  # median over repetitions
    algbw: float  # GB/s
    busbw: float  # GB/s
    wrong: int | None  # None: not checked
    times_us: list[float] = field(default_factory=list)  # per repetition: the mean call
    calls_us: list[float] = field(default_factory=list)  # every timed call, slowest rank

    def asdict(self) -> dict:
        return asdict(self)


class Progress:
    """A one-line progress bar on stderr (rank 0 only; silent when disabled)."""

    def __init__(self, total: int, enabled: bool):
        self.total, self.done, self.enabled, self.t0 = total, 0, enabled, time.monotonic()

    def step(self, what: str) -> None:
        self.done += 1
        if not self.enabled:
            return
        frac = self.done / max(self.total, 1)
        bar = "#" * int(30 * frac)
        sys.stderr.write(
            f"\r[{bar:<30}] {self.done}/{self.total} {time.monotonic() - self.t0:6.1f}s {what:<28}"
        )
        if self.done >= self.total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def _sync(device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _agree_max(values: list[float], device, group) -> list[float]:
    t = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(t, dist.ReduceOp.MAX, group)
    return t.tolist()


def _barrier(device, group) -> None:
    t = torch.zeros(1, device=device)
    dist.all_reduce(t, group=group)
    _sync(device)


def time_calls(case: Case, algorithm: str, iters: int) -> list[float]:
    """Seconds of each of ``iters`` back-to-back calls on this rank; their sum
    is the loop's time (on a GPU, CUDA events between calls: no host sync)."""
    _barrier(case.device, case.group)
    if case.device.type == "cuda":
        marks = [torch.cuda.Event(enable_timing=True) for _ in range(iters + 1)]
        marks[0].record()
        for m in marks[1:]:
            case.call(algorithm)
            m.record()
        _sync(case.device)
        return [a.elapsed_time(b) * 1e-3 for a, b in zip(marks, marks[1:])]
    stamps = [time.perf_counter()]
    for _ in range(iters):
        case.call(algorithm)
        stamps.append(time.perf_counter())
    return [b - a for a, b in zip(stamps, stamps[1:])]


def run_size(
    case: Case, algorithms: list[str], iters: int, warmup: int, reps: int, check: bool, progress: Progress
) -> list[Result]:
    """Measure every algorithm on one case, interleaved; one :class:`Result` each."""
    algs = [a for a in algorithms if a != NATIVE or case.native_supported()]
    wrong = {}
    for a in algs:
        if check:
            w = torch.tensor([case.check(a)], device=case.device)
            dist.all_reduce(w, group=case.group)
            wrong[a] = int(w.item())
        for _ in range(warmup):
            case.call(a)
    _sync(case.device)
    samples: dict[str, list[float]] = {a: [] for a in algs}
    calls: dict[str, list[float]] = {a: [] for a in algs}
    for rep in range(reps):
        order = algs[rep % len(algs) :] + algs[: rep % len(algs)]
        got = [time_calls(case, a, iters) for a in order]
        means = [sum(ts) / len(ts) for ts in got]
        agreed = _agree_max(means + [t for ts in got for t in ts], case.device, case.group)
        for i, a in enumerate(order):
            samples[a].append(agreed[i] * 1e6)
            first = len(order) + i * iters
            calls[a] += [round(t * 1e6, 1) for t in agreed[first : first + iters]]
        progress.step(f"{case.collective} {case.bytes}B")
    out = []
    for a in algorithms:
        if a not in samples:
            continue
        med = statistics.median(samples[a])
        algbw, busbw = bandwidths(case.collective, case.bytes, med * 1e-6, case.p)
        root = case.root if case.record.rooted else -1
        redop = case.redop if case.record.reducing else "none"
        out.append(
            Result(case.collective, a, case.bytes, case.count, TYPE_NAMES.get(case.dtype, str(case.dtype)),
                   redop, root, case.p, med, algbw, busbw, wrong.get(a), samples[a], calls[a])
        )  # fmt: skip
    return out


def run_sweep(
    collective: str,
    sizes: list[int],
    algorithms: list[str],
    *,
    dtype: torch.dtype = torch.float32,
    redop: str = "sum",
    root: int = 0,
    iters: int = 20,
    warmup: int = 5,
    reps: int = 5,
    check: bool = True,
    arg_check: bool = False,
    group=None,
    device: torch.device | None = None,
    progress: bool = False,
    on_size=None,
) -> list[Result]:
    """Run the sweep on every rank of ``group``; every rank returns the same results.

    ``on_size(results)`` is called after each size (to print its row).
    """
    device = device or torch.device("cpu")
    bar = Progress(len(sizes) * reps, progress and dist.get_rank(group) == 0)
    out: list[Result] = []
    for n in sizes:
        case = Case(collective, n, dtype, redop, root, arg_check, group, device)
        rows = run_size(case, algorithms, iters, warmup, reps, check, bar)
        out += rows
        if on_size is not None:
            on_size(rows)
        del case
    return out
