"""Sizes, element types and bandwidths, in nccl-tests' vocabulary.

nccl-tests reports ``algbw = size / time`` and ``busbw = algbw * factor``,
where the factor turns the algorithm's bandwidth into what each link carries
with an optimal algorithm, so that numbers compare across world sizes
(nccl-tests' ``doc/PERFORMANCE.md``). The factor and the meaning of ``size``
are facts of each collective, in its record
(:meth:`mycollectives.collectives.Collective.bound` and ``.spec``).
"""

from __future__ import annotations

import re

import torch

from ..cliargs import LARGEST
from ..collectives import busbw_factor

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
    n = int(m.group(1)) << (10 * " KMGT".index(m.group(2).upper() or " "))
    if n > LARGEST:
        raise ValueError(f"size {text!r}: more bytes than a tensor can hold (at most 2**63 - 1)")
    return n


def format_size(nbytes: int) -> str:
    """The inverse of :func:`parse_size` for whole units: ``65536 -> "64K"``."""
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if nbytes >= 1 << shift and nbytes % (1 << shift) == 0:
            return f"{nbytes >> shift}{unit}"
    return str(nbytes)


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


def bandwidths(collective: str, nbytes: int, seconds: float, world_size: int) -> tuple[float, float]:
    """``(algbw, busbw)`` in GB/s (1e9 bytes per second, as nccl-tests)."""
    if seconds <= 0:
        return 0.0, 0.0
    algbw = nbytes / seconds / 1e9
    return algbw, algbw * busbw_factor(collective, world_size)
