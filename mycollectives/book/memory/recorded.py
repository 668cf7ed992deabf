"""A recorded run of lab 1, read back from its printed output (lab 1, "A recorded run on an H100").

``benchmarks/run_gpu.sh`` runs lab 1 on a GPU node and keeps what its cells
print (``labs/recorded/lab1_h100.txt``). :func:`read` turns that text back
into the measurements the lab's plots take, so that the lab draws the
recorded run with the same functions as a live one:

>>> rec = read("# recorded today on a GPU\\n      0.25 MiB     9609.5 GB/s\\n"
...            "cuda (float32, measured): 51.20 TFLOP/s (datasheet 67 TFLOP/s dense), 2889 GB/s\\n"
...            "   GEMM 4096x16384x4096          910.22 FLOPs/B    50.798 TFLOP/s\\n")
>>> round(rec.sweep[0].bandwidth / 1e9, 1), rec.rooflines["float32"].peak_flops / 1e12
(9609.5, 51.2)
>>> rec.kernels["float32"][0].name, round(rec.kernels["float32"][0].flops_per_s / 1e12, 3)
('GEMM 4096x16384x4096', 50.798)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ...memory.bandwidth import BandwidthPoint
from ...memory.ledger import STAGES
from ...memory.roofline import KernelPoint, Roofline

_SWEEP = re.compile(r"^\s+([\d.]+) MiB\s+([\d.]+) GB/s\s*$", re.M)
_ROOF = re.compile(r"^cuda \((\w+), measured\): ([\d.]+) TFLOP/s .*?, ([\d.]+) GB/s\s*$", re.M)
_KERNEL = re.compile(r"^\s{3}(\S.*?)\s+([\d.]+) FLOPs/B\s+([\d.]+) TFLOP/s\s*$")
_LEDGER_TITLE = re.compile(r"^(\S.*): batch \d+ x \d+, \d+ layers\s*$")
_STAGE = re.compile(r"^\s+(.+?)\s+predicted\s+([\d.]+) MB\s+measured\s+([\d.]+) MB")


@dataclass
class Recorded:
    """What a recorded lab 1 run measured."""

    header: str
    sweep: list[BandwidthPoint] = field(default_factory=list)
    rooflines: dict[str, Roofline] = field(default_factory=dict)  # by dtype
    kernels: dict[str, list[KernelPoint]] = field(default_factory=dict)  # by dtype
    ledgers: dict[str, tuple[dict[str, int], dict[str, int]]] = field(
        default_factory=dict
    )  # predicted, measured


def read(text: str) -> Recorded:
    """Parse a recorded lab 1 output (``labs/recorded/lab1_h100.txt``)."""
    rec = Recorded(text.splitlines()[0].lstrip("# "))
    for mib, gbs in _SWEEP.findall(text):
        size = int(float(mib) * 2**20)
        rec.sweep.append(BandwidthPoint(size, 1, size / (float(gbs) * 1e9)))
    dtype, ledger = None, None
    for line in text.splitlines():
        roof = _ROOF.match(line)
        if roof:
            dtype = roof.group(1)
            label = f"measured ({dtype})"
            rec.rooflines[dtype] = Roofline(float(roof.group(2)) * 1e12, float(roof.group(3)) * 1e9, label)
            rec.kernels[dtype] = []
            continue
        kernel = _KERNEL.match(line)
        if kernel and dtype is not None:
            name, intensity, tflops = kernel.group(1), float(kernel.group(2)), float(kernel.group(3))
            rec.kernels[dtype].append(KernelPoint(name, intensity, 1.0, tflops * 1e12))  # FLOPs in one second
            continue
        title = _LEDGER_TITLE.match(line)
        if title:
            dtype, ledger = None, rec.ledgers.setdefault(title.group(1), ({}, {}))
            continue
        stage = _STAGE.match(line)
        if stage and ledger is not None and stage.group(1) in STAGES:
            ledger[0][stage.group(1)] = int(float(stage.group(2)) * 1e6)
            ledger[1][stage.group(1)] = int(float(stage.group(3)) * 1e6)
    return rec


__all__ = ["Recorded", "read"]
