"""Gradient buckets: one gradient all-reduced in buckets of several sizes, timed (chapter 6).

DDP all-reduces its gradients in buckets of ``bucket_cap_mb`` MiB (25 by
default), so that communication starts before the backward pass ends. Every
bucket is one collective, and every collective pays its latency: many small
buckets pay it many times. :func:`bucket_sweep` measures that on a process
group (run it with :func:`mycollectives.run_gloo`, or on a virtual cluster, whose
clock :func:`mycollectives.timing.now` reads); :func:`fit_buckets` fits
``T(b) = (M / b) A + M B``, a latency ``A`` per bucket and a time ``B`` per
byte, to the measurements, which is the ring all-reduce's cost model with
``A = 2(p - 1) alpha`` and ``B = 2(p - 1) / p beta``.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

import numpy as np

from ...timing import now


def bucket_sweep(rank: int, nbytes: int, buckets: Sequence[int], reps: int = 5) -> dict[int, float]:
    """Median seconds to all-reduce ``nbytes`` of float32 in buckets of each size (bytes), ranks lined up."""
    import torch

    from ... import api

    torch.set_num_threads(1)
    grad = torch.ones(nbytes // 4)
    out = {}
    for b in buckets:
        count = max(b // 4, 1)
        parts = list(grad.split(count))
        for part in parts[:2]:  # warm-up
            api.all_reduce(part, algorithm="ring")
        times = []
        for _ in range(reps):
            api.barrier()
            t0 = now()
            for part in parts:
                api.all_reduce(part, algorithm="ring")
            times.append(now() - t0)
        out[b] = statistics.median(times)
    return out


def fit_buckets(times: dict[int, float], nbytes: int) -> tuple[float, float]:
    """Least-squares ``(A, B)`` of ``T(b) = (nbytes / b) A + nbytes B``: seconds per bucket, per byte."""
    b = np.array(sorted(times), dtype=float)
    t = np.array([times[int(x)] for x in b])
    design = np.stack([nbytes / b, np.full_like(b, float(nbytes))], axis=1)
    (a, beta), *_ = np.linalg.lstsq(design, t, rcond=None)
    return float(a), float(beta)
