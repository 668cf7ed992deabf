"""Launching local gloo worlds: :func:`run_gloo`, the multi-process twin of ``run_local``.

``run_gloo(fn, world_size, *args)`` starts ``world_size`` processes, joins
them in a ``torch.distributed`` gloo process group, runs ``fn(rank, *args)``
on each and returns the results in rank order, as ``run_local`` does with
threads. Each process sees the environment ``torchrun`` would give it
(``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``), so code
written for ``torchrun`` runs unchanged. ``fn`` must be importable by the
child processes (a function of a module, not a lambda): they are spawned.

:class:`GlooPool` keeps its processes for many calls (starting processes and
a group costs seconds), which is how the tests run hundreds of cases. A call
that does not finish within its timeout kills the pool and raises
``TimeoutError`` naming the ranks still running, so nothing hangs.
"""

from __future__ import annotations

import datetime
import os
import queue
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable

import torch.multiprocessing as mp


def _worker(rank: int, p: int, store: str, tasks, results, path: list[str], threads: int | None) -> None:
    sys.path[:0] = [x for x in path if x not in sys.path]
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(p), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(p))
    if threads:
        os.environ["OMP_NUM_THREADS"] = str(threads)
    import torch
    import torch.distributed as dist

    if threads:
        torch.set_num_threads(threads)
    dist.init_process_group(
        "gloo",
        init_method=f"file://{store}",
        rank=rank,
        world_size=p,
        timeout=datetime.timedelta(seconds=300),
    )
    results.put((rank, "ready", None))
    while True:
        task = tasks.get()
        if task is None:
            break
        fn, args = task
        try:
            results.put((rank, "ok", fn(rank, *args)))
        except BaseException as e:  # noqa: BLE001 - reported to the caller
            results.put((rank, "error", f"{type(e).__name__}: {e}\n{traceback.format_exc()}"))
    dist.destroy_process_group()


class GlooPool:
    """``world_size`` processes joined in a gloo group, running one task at a time.

    ``threads`` sets each process's ``torch.set_num_threads`` (and
    ``OMP_NUM_THREADS``), as ``torchrun`` sets the latter to 1.
    """

    def __init__(self, world_size: int, start_timeout: float = 120, threads: int | None = 1):
        if not isinstance(world_size, int) or world_size < 1:
            raise ValueError(f"world_size must be a positive int, got {world_size!r}")
        ctx = mp.get_context("spawn")
        self.p = world_size
        self._dir = tempfile.mkdtemp(prefix="mycollectives-gloo-")
        store = os.path.join(self._dir, "store")  # a file store: no port to race for
        self.tasks = [ctx.Queue() for _ in range(world_size)]
        self.results = ctx.Queue()
        self.procs = [
            ctx.Process(
                target=_worker,
                args=(r, world_size, store, self.tasks[r], self.results, sys.path, threads),
                daemon=True,
            )
            for r in range(world_size)
        ]
        for proc in self.procs:
            proc.start()
        self._collect(start_timeout)

    def _collect(self, timeout: float, ranks=None) -> list:
        ranks = list(range(self.p)) if ranks is None else ranks
        out: list = [None] * self.p
        deadline = time.monotonic() + timeout
        while any(out[r] is None for r in ranks):
            try:
                rank, status, value = self.results.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                missing = [r for r in ranks if out[r] is None]
                self.kill()
                raise TimeoutError(f"ranks {missing} did not finish within {timeout:g} s (a hang?)") from None
            out[rank] = (status, value)
        return out

    def run(self, fn: Callable, *args, timeout: float = 300, ranks=None) -> list[tuple[str, object]]:
        """``fn(rank, *args)`` on every rank: ``[(status, value)]`` in rank order,
        status ``"ok"`` with the result or ``"error"`` with the traceback.
        ``ranks``: wait for these only (the others may die on purpose)."""
        for q in self.tasks:
            q.put((fn, args))
        return self._collect(timeout, ranks)

    def alive(self) -> bool:
        return all(proc.is_alive() for proc in self.procs)

    def kill(self) -> None:
        for proc in self.procs:
            if proc.is_alive():
                proc.kill()
        for proc in self.procs:
            proc.join(5)
        shutil.rmtree(self._dir, ignore_errors=True)

    def close(self) -> None:
        for q in self.tasks:
            q.put(None)
        for proc in self.procs:
            proc.join(10)
        self.kill()

    def __enter__(self) -> GlooPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def run_gloo(fn: Callable, world_size: int, *args, timeout: float = 300, threads: int | None = 1) -> list:
    """Run ``fn(rank, *args)`` on ``world_size`` fresh gloo processes; the results in rank order.

    If a rank raises, :class:`RuntimeError` names the first such rank and
    carries its traceback. For example, with ``step`` a function of your
    module (so that the spawned processes can import it)::

        def step(rank):
            t = torch.full((4,), float(rank))
            mc.all_reduce(t, algorithm="ring")  # over gloo, the default group
            return t.tolist()

        mc.run_gloo(step, 4)  # [[6.0, 6.0, 6.0, 6.0], ...] from four processes
    """
    with GlooPool(world_size, threads=threads) as pool:
        out = pool.run(fn, *args, timeout=timeout)
    for rank, (status, value) in enumerate(out):
        if status != "ok":
            raise RuntimeError(f"rank {rank} of a gloo world of {world_size} raised {value}")
    return [value for _, value in out]
