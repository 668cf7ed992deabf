"""Sizes, counts and bus bandwidth, as nccl-tests defines them.

nccl-tests reports ``algbw = size / time`` and ``busbw = algbw * factor``,
where the factor turns the algorithm's bandwidth into what each link carries
with an optimal algorithm, so that numbers compare across world sizes
(nccl-tests' ``doc/PERFORMANCE.md``). ``size`` is the bytes of the largest
buffer of the call: the whole vector for all-reduce, broadcast and reduce;
the gathered output for all-gather; the input of reduce-scatter; one rank's
whole send buffer for all-to-all.
"""

from __future__ import annotations

import re

import torch

# n: world size
BUSBW_FACTORS = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
    "scatter": lambda n: (n - 1) / n,
    "gather": lambda n: (n - 1) / n,
}

# names nccl-tests prints in its ``type`` column
TYPE_NAMES = {
    torch.int8: "int8",
    torch.uint8: "uint8",
    torch.int32: "int32",
    torch.int64: "int64",
    torch.float16: "half",
    torch.float32: "float",
    torch.float64: "double",
    torch.bfloat16: "bfloat16",
}
DTYPES = {name: dt for dt, name in TYPE_NAMES.items()}
DTYPES.update({"float32": torch.float32, "float16": torch.float16, "float64": torch.float64})

ROOTED = ("broadcast", "reduce", "scatter", "gather")
REDUCING = ("all_reduce", "reduce", "reduce_scatter")


def busbw_factor(collective: str, world_size: int) -> float:
    """nccl-tests' bus-bandwidth factor.

    >>> busbw_factor("all_reduce", 4), busbw_factor("all_gather", 4), busbw_factor("broadcast", 4)
    (1.5, 0.75, 1.0)
    """
    return BUSBW_FACTORS[collective](world_size)


def parse_size(text: str | int) -> int:
    """Bytes from nccl-tests' notation: ``8``, ``64K``, ``16M``, ``1G`` (powers of 1024).

    >>> parse_size("64K"), parse_size("16M"), parse_size(8)
    (65536, 16777216, 8)
    """
    if isinstance(text, int):
        return text
    m = re.fullmatch(r"\s*(\d+)\s*([kKmMgGtT]?)[bB]?\s*", str(text))
    if not m:
        raise ValueError(f"size {text!r}: expected bytes such as 8, 64K, 16M or 1G")
    return int(m.group(1)) << (10 * " KMGT".index(m.group(2).upper() or " "))


def sizes(min_bytes: int, max_bytes: int, factor: int = 2, step_bytes: int = 0) -> list[int]:
    """The sweep: ``min_bytes`` times ``factor`` until ``max_bytes`` (or a fixed step).

    >>> sizes(1024, 8192)
    [1024, 2048, 4096, 8192]
    """
    if min_bytes <= 0 or max_bytes < min_bytes:
        raise ValueError(f"need 0 < min bytes <= max bytes, got {min_bytes} and {max_bytes}")
    out, n = [], min_bytes
    while n <= max_bytes:
        out.append(n)
        if step_bytes:
            n += step_bytes
        elif factor > 1:
            n *= factor
        else:
            raise ValueError("factor must be at least 2 (or give a step)")
    return out


def count_for(collective: str, nbytes: int, world_size: int, itemsize: int) -> int:
    """Elements of the ``size`` buffer, rounded down to what splits evenly
    among ranks where the collective splits it (as nccl-tests does)."""
    count = nbytes // itemsize
    if collective in ("all_gather", "reduce_scatter", "all_to_all", "scatter", "gather"):
        count -= count % world_size
    return count


def bandwidths(collective: str, nbytes: int, seconds: float, world_size: int) -> tuple[float, float]:
    """``(algbw, busbw)`` in GB/s (1e9 bytes per second, as nccl-tests)."""
    if seconds <= 0:
        return 0.0, 0.0
    algbw = nbytes / seconds / 1e9
    return algbw, algbw * busbw_factor(collective, world_size)
