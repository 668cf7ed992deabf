"""NCCL 2.30.7's cost model and topology search, in the package's own words (chapter 4).

* :mod:`~mycollectives.nccl.constants`: the tuning constants of
  ``src/graph/tuning.cc`` and the bandwidths of ``src/graph/topo.h`` and
  ``src/graph/search.cc``, each with the lines it comes from;
* :mod:`~mycollectives.nccl.model`: latency and bandwidth of every algorithm
  and protocol, and the choice NCCL makes from them;
* :mod:`~mycollectives.nccl.search`: the channels NCCL's search would find on
  a machine described by a few numbers;
* :mod:`~mycollectives.nccl.enqueue`: the channels and threads one call runs.

This is the one place the package keeps NCCL's numbers: chapter 2's link
latencies, the protocols of :mod:`mycollectives.topology.protocols` and the
channel simulator of :mod:`mycollectives.sim.nccl` all read them from here.

>>> from mycollectives.nccl import Hardware, choose, system
>>> h100 = Hardware("hopper", 8, 370.8, 8, 50.0, 48.0, nvls=True)
>>> choose(system(h100, 8, 1), "all_reduce", 1 << 30)[:2]
('NVLS', 'Simple')
"""

from __future__ import annotations

from . import constants
from .constants import ALGORITHMS, PROTOCOLS
from .model import FUNCS, Graph, System, bandwidth, choose, latency, latency_us, time_us
from .search import Hardware, system

__all__ = [
    "constants",
    "ALGORITHMS",
    "PROTOCOLS",
    "FUNCS",
    "Graph",
    "System",
    "Hardware",
    "bandwidth",
    "latency",
    "latency_us",
    "time_us",
    "choose",
    "system",
]
