"""Timing collectives on a local world: ranks as threads of this process (chapter 3).

The bench proper (:mod:`.cli`) times processes under ``torchrun``; a chapter
that runs in a notebook times a :class:`~mycollectives.LocalWorld` instead, a
poor network but a real one. :func:`time_local` runs, in every repetition,
each algorithm of each collective once in turn, after a barrier, so that a
change of load hits them all alike, and keeps each call's time on its
slowest rank. Every collective is called through its record
(:meth:`~mycollectives.collectives.Collective.call`), on buffers sized by
its record, as the bench does.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

import numpy as np
import torch

from .. import api
from ..collectives import record
from ..transport import LocalWorld


def _numel(pieces) -> int:
    return sum(count for _, _, count in pieces)


def time_local(
    world_size: int, menu: Mapping[str, Sequence[str]], sizes: Sequence[int], reps: int = 15
) -> dict[tuple[str, str, int], np.ndarray]:
    """Seconds of every repetition of every ``(collective, algorithm, size)``,
    the slowest rank's; ``menu`` maps a collective to the algorithms to time,
    ``sizes`` are nccl-tests' sizes in bytes (float32). The argument check is
    off (``check=False``): it would add its own messages to every call."""

    def measure(rank: int) -> dict:
        times: dict = {}
        for name, algorithms in menu.items():
            c = record(name)
            for size in sizes:
                spec = c.spec(world_size, size)
                inp = torch.zeros(_numel(c.input_at(spec, rank)))
                out = inp if c.in_place else torch.zeros(_numel(c.output_at(spec, rank)))
                op = api.ReduceOp.SUM if c.reducing else None
                for _ in range(reps):
                    for a in algorithms:
                        api.barrier(check=False)
                        t0 = time.perf_counter()
                        c.call(api, inp, out, op, 0, None, rank, algorithm=a, check=False)
                        times.setdefault((name, a, size), []).append(time.perf_counter() - t0)
        return times

    per_rank = LocalWorld(world_size, trace=False).run(measure)
    return {k: np.max([r[k] for r in per_rank], axis=0) for k in per_rank[0]}
