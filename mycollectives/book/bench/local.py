"""Timing collectives on a local world: ranks as threads of this process (chapters 2 and 3b).

The bench proper (:mod:`mycollectives.bench.cli`) times processes under ``torchrun``; a chapter
that runs in a notebook times a :class:`~mycollectives.LocalWorld` instead, a
poor network but a real one. :func:`time_local` runs, in every repetition,
each algorithm of each collective once in turn, after a barrier, so that a
change of load hits them all alike, and keeps each call's time on its
slowest rank. Every collective is called through its record
(:meth:`~mycollectives.collectives.Collective.call`), on buffers sized by
its record, as the bench does, and the results are the bench's
:class:`~mycollectives.bench.runner.Result` rows, so that :mod:`mycollectives.bench.predicted` fits and judges a
model on them as on a recorded sweep. :func:`trace_call` records the
messages of one call, for a space-time diagram in measured time.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import torch

from ... import api
from ...bench.factors import bandwidths
from ...bench.runner import Result
from ...collectives import record
from ...timing import now
from ...transport import LocalWorld


def _numel(pieces) -> int:
    return sum(count for _, _, count in pieces)


def time_local(
    world_size: int,
    menu: Mapping[str, Sequence[str]],
    sizes: Sequence[int],
    reps: int = 15,
    run: Callable[[Callable], list] | None = None,
    options: Mapping | None = None,
) -> list[Result]:
    """One :class:`~mycollectives.bench.runner.Result` per ``(collective, algorithm, size)``: ``times_us``
    holds every repetition's time on the slowest rank, ``time_us`` their median.

    ``menu`` maps a collective to the algorithms to time, ``sizes`` are
    nccl-tests' sizes in bytes (float32). The argument check is off
    (``check=False``): it would add its own messages to every call.
    ``run(fn)`` runs ``fn(rank)`` on ``world_size`` ranks and returns their
    results (default: a fresh local world); with a virtual run
    (``lambda fn: virtual.run(fn, "dgx_h100").results``) the times are the
    modelled cluster's, read from :func:`mycollectives.timing.now`. ``options`` are passed on to
    every call (``{"channels": 1}``: each algorithm on one channel, as its schedule is written).
    """

    def measure(rank: int) -> dict:
        times: dict = {}
        for name, algorithms in menu.items():
            c = record(name)
            for size in dict.fromkeys(c.size(c.spec(world_size, n)) for n in sizes):  # a barrier's is 0
                spec = c.spec(world_size, size)
                inp = torch.zeros(_numel(c.input_at(spec, rank)))
                out = inp if c.in_place else torch.zeros(_numel(c.output_at(spec, rank)))
                op = api.ReduceOp.SUM if c.reducing else None
                kw = dict(spec=spec, check=False, **(options or {}))  # options may not name these
                for _ in range(reps):
                    for a in algorithms:
                        api.barrier(check=False)
                        t0 = now()
                        c.call(api, inp, out, op, 0, None, rank, algorithm=a, **kw)
                        times.setdefault((name, a, size), []).append(now() - t0)
        return times

    per_rank = (run or LocalWorld(world_size, trace=False).run)(measure)
    out = []
    for (name, a, size), _ in per_rank[0].items():
        c = record(name)
        spec = c.spec(world_size, size)
        us = (np.max([r[name, a, size] for r in per_rank], axis=0) * 1e6).tolist()  # slowest rank
        med = statistics.median(us)
        algbw, busbw = bandwidths(name, size, med * 1e-6, world_size)
        redop, root = ("sum" if c.reducing else "none"), (0 if c.rooted else -1)
        out.append(
            Result(name, a, size, spec.count, "float", redop, root, world_size,
                   med, algbw, busbw, None, us, us)
        )  # fmt: skip
    return out


def trace_call(world_size: int, fn: Callable[[torch.Tensor], object], nbytes: int) -> list:
    """The messages of one call of ``fn(tensor)`` on every rank of a fresh local
    world, in measured time (:class:`~mycollectives.transport.local.TraceEvent`).

    ``fn`` runs twice, after a barrier each time; the first call warms up (it
    builds the schedule and its buffers), and only the second one's messages
    are returned, without those of the argument check that the API exchanges
    before a collective.
    """
    world = LocalWorld(world_size)
    start = [0.0] * world_size

    def body(rank: int) -> None:
        t = torch.full((nbytes // 4,), float(rank))
        fn(t)
        api.barrier(check=False)
        start[rank] = world.now()
        fn(t)

    world.run(body)
    t0 = min(start)
    return [
        e
        for e in world.trace
        if e.t_send >= t0 and e.collective != "barrier" and not e.collective.endswith("(argument check)")
    ]
