"""Bandwidth against working-set size: the cache cliffs of the machine at hand.

Introduced in chapter 1 (the memory hierarchy). One measurement reads a buffer
of ``size`` bytes many times over inside a *single* kernel: the buffer is
viewed as ``(passes, n)`` with stride 0 on the first axis (``expand``), and
summed. Every pass reads the same bytes, so a buffer that fits in a cache is
served from that cache, and the per-call overhead (microseconds in torch) is
paid once for many passes instead of once per pass.

On CPU the sweep runs on one thread: L1 and L2 belong to one core, and
torch's threaded reduction over a stride-0 axis splits the work erratically.

On CUDA the view is reduced row by row (``sum(dim=1)``): a whole-tensor sum
over a stride-0 axis loads one element at a time and tops out near HBM speed
at every size (2.6-2.7 TB/s on an H100, L2 or not), hiding the L2 cliff. Rows
run concurrently, so a buffer larger than L2 would still hit in L2 when two
rows read the same bytes at once; beyond the L2 capacity each pass is
therefore its own contiguous ``sum()``, queued back to back in one timed call.
"""

from __future__ import annotations

import functools
import glob
import os
from collections.abc import Callable
from dataclasses import dataclass

import torch

from .timing import best_time


@dataclass(frozen=True)
class BandwidthPoint:
    """Read bandwidth measured for one working-set size."""

    size_bytes: int
    passes: int
    seconds: float

    @property
    def bandwidth(self) -> float:
        """Bytes read per second."""
        return self.size_bytes * self.passes / self.seconds


def default_sizes(device: torch.device | str = "cpu") -> list[int]:
    """Working-set sizes that straddle every cache level of ``device``.

    CPU: 16 KiB to 128 MiB (L1 to DRAM); CUDA: 256 KiB to 1 GiB (L1, L2, HBM).
    """
    lo, hi = (14, 27) if torch.device(device).type == "cpu" else (18, 30)
    return [2**k for k in range(lo, hi + 1)]


def bandwidth_sweep(
    sizes: list[int] | None = None,
    device: torch.device | str = "cpu",
    bytes_per_measurement: int = 64 * 2**20,
    repeats: int = 3,
    dtype: torch.dtype = torch.float32,
) -> list[BandwidthPoint]:
    """Read bandwidth for each working-set size in ``sizes`` (bytes).

    Each measurement reads about ``bytes_per_measurement`` bytes (at least
    one whole pass), so small and large buffers cost the same time to measure.

    >>> pts = bandwidth_sweep([2**16, 2**20], bytes_per_measurement=2**22)
    >>> [p.size_bytes for p in pts]
    [65536, 1048576]
    """
    sizes = default_sizes(device) if sizes is None else sizes
    itemsize = torch.empty((), dtype=dtype).element_size()
    threads = torch.get_num_threads()
    if torch.device(device).type == "cpu":
        torch.set_num_threads(1)
    try:
        return [_measure(size, device, bytes_per_measurement, repeats, dtype, itemsize) for size in sizes]
    finally:
        torch.set_num_threads(threads)


def _measure(
    size: int,
    device: torch.device | str,
    bytes_per_measurement: int,
    repeats: int,
    dtype: torch.dtype,
    itemsize: int,
) -> BandwidthPoint:
    n = max(1, size // itemsize)
    buf = torch.ones(n, dtype=dtype, device=device)
    passes = max(1, bytes_per_measurement // (n * itemsize))
    view = buf.expand(passes, n)  # (passes, n), stride 0 over passes: no copy
    fn: Callable[[], object] = view.sum
    if torch.device(device).type == "cuda":
        l2 = cache_sizes(device).get("L2", 0)
        if n * itemsize <= l2:
            fn = functools.partial(view.sum, dim=1)
        else:

            def fn() -> None:
                for _ in range(passes):
                    buf.sum()

    seconds = best_time(fn, device, repeats=repeats)
    return BandwidthPoint(n * itemsize, passes, seconds)


def cache_sizes(device: torch.device | str = "cpu") -> dict[str, int]:
    """Cache capacities of ``device`` as the system reports them, in bytes.

    CPU (Linux): the data and unified caches of CPU 0 from sysfs, per core
    for L1 and L2, shared for L3. CUDA: the L2 capacity torch reports.
    Empty where nothing is reported.
    """
    if torch.device(device).type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return {"L2": int(getattr(props, "L2_cache_size", 0))} if getattr(props, "L2_cache_size", 0) else {}
    found: dict[str, int] = {}
    for index in sorted(glob.glob("/sys/devices/system/cpu/cpu0/cache/index*")):
        try:
            kind = open(os.path.join(index, "type")).read().strip()
            level = open(os.path.join(index, "level")).read().strip()
            text = open(os.path.join(index, "size")).read().strip()
        except OSError:
            continue
        if kind == "Instruction":
            continue
        scale = {"K": 1024, "M": 1024**2, "G": 1024**3}.get(text[-1], 1)
        found[f"L{level}"] = int(text.rstrip("KMG")) * scale
    return found
