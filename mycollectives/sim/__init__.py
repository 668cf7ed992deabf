"""Simulating schedules on topologies (chapter 4): time, algbw, busbw, timeline, link use.

:func:`simulate` runs one of the package's schedules round by round;
:func:`simulate_nccl` prices one of NCCL's algorithms channel by channel;
:func:`tune` picks what NCCL would; ``python -m mycollectives.sim.expect``
prints the busbw a cluster should give.

>>> from mycollectives.sim import simulate
>>> from mycollectives.topology import dgx_a100
>>> simulate("all_reduce", "ring", 1 << 20, dgx_a100())  # doctest: +ELLIPSIS
SimResult(all_reduce/ring/simple on dgx_a100, p=8, 1048576 B: ...)
"""

from __future__ import annotations

from .engine import algorithms, simulate
from .fluid import Paths, drain, max_min_rates
from .nccl import simulate_nccl
from .result import SimResult
from .sweeps import crossover, nccl_table, sizes, sweep
from .tuner import tune

__all__ = [
    "algorithms",
    "simulate",
    "simulate_nccl",
    "SimResult",
    "Paths",
    "drain",
    "max_min_rates",
    "sweep",
    "crossover",
    "nccl_table",
    "sizes",
    "tune",
]
