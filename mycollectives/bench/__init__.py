"""An nccl-tests-style benchmark of our collectives against the backend's own.

Run ``python -m mycollectives.bench -o all_reduce -b 64K -e 64M --algorithm all``
under ``torchrun`` (NCCL on GPUs, gloo on CPUs) or with ``--nprocs N`` (local
gloo processes). The output keeps nccl-tests' columns (size, count, type,
redop, root, then time, algbw, busbw, #wrong for each algorithm measured),
and the busbw factors of nccl-tests' ``doc/PERFORMANCE.md``. Introduced in
the book's benchmark page and used by lab 3.

Modules, one concern each:

* ``factors``: sizes, element types and bandwidths (the busbw factor is each
  collective's record's);
* ``cases``: how to run one collective with one algorithm (or natively);
* ``runner``: warm-up, timing, interleaving and checking;
* ``report``: the nccl-tests table, CSV and JSON;
* ``predicted``: the alpha-beta-gamma prediction next to the measurement;
* ``plot``: busbw against size, predicted against measured;
* ``cli``: the command line and the launch (torchrun or ``--nprocs``);
* ``virtual``: the same sweep on a virtual cluster (``--virtual dgx_h100``).

The pages' own timing helpers (a local world's sweep, symmetric memory timed
three ways, gradient buckets, recorded runs read back) are the book's, in
``mycollectives.book.bench``.
"""

from __future__ import annotations

from .factors import busbw_factor, parse_size, sizes
from .runner import Result, run_sweep

__all__ = ["busbw_factor", "parse_size", "sizes", "Result", "run_sweep"]
