"""Timing that is honest on CPU and CUDA: warm up, synchronise, take the best."""

from __future__ import annotations

import time
from collections.abc import Callable

import torch


def synchronize(device: torch.device | str) -> None:
    """Wait for queued work on ``device`` (a no-op on CPU)."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def best_time(
    fn: Callable[[], object], device: torch.device | str = "cpu", repeats: int = 5, warmup: int = 1
) -> float:
    """Seconds of the fastest of ``repeats`` calls of ``fn`` after ``warmup`` calls.

    The minimum, not the mean: on a shared machine noise only ever adds time.
    """
    for _ in range(warmup):
        fn()
    synchronize(device)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        synchronize(device)
        best = min(best, time.perf_counter() - start)
    return best
