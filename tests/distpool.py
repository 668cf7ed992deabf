"""A pool of real processes joined in a torch.distributed (gloo) group.

Starting processes and a process group costs seconds, so each world size
gets one pool that runs many test tasks. A task is a function of this test
package, called as ``fn(rank, *args)`` on every rank; each rank's result
(or its exception, as text) comes back. A task that does not finish within
its timeout kills the pool, and the test fails instead of hanging.
"""

from __future__ import annotations

import datetime
import importlib
import os
import queue
import socket
import sys
import time
import traceback

import torch.multiprocessing as mp


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank: int, p: int, port: int, tasks, results, path: list[str]) -> None:
    sys.path[:0] = [x for x in path if x not in sys.path]
    os.environ["OMP_NUM_THREADS"] = "1"
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=p,
        timeout=datetime.timedelta(seconds=120),
    )  # fmt: skip
    results.put((rank, "ready", None))
    while True:
        task = tasks.get()
        if task is None:
            break
        module, name, args = task
        try:
            fn = getattr(importlib.import_module(module), name)
            results.put((rank, "ok", fn(rank, *args)))
        except BaseException as e:  # noqa: BLE001 - reported to the test
            results.put((rank, "error", f"{type(e).__name__}: {e}\n{traceback.format_exc()}"))
    dist.destroy_process_group()


class Pool:
    def __init__(self, p: int, start_timeout: float = 120):
        ctx = mp.get_context("spawn")
        self.p = p
        self.tasks = [ctx.Queue() for _ in range(p)]
        self.results = ctx.Queue()
        port = _free_port()
        self.procs = [
            ctx.Process(target=_worker, args=(r, p, port, self.tasks[r], self.results, sys.path), daemon=True)
            for r in range(p)
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
                raise TimeoutError(f"ranks {missing} did not finish within {timeout} s (hang?)") from None
            out[rank] = (status, value)
        return out

    def run(self, module: str, name: str, *args, timeout: float = 120, ranks=None) -> list:
        """Run ``module.name(rank, *args)`` on every rank; ``[(status, value)]`` in rank
        order. ``ranks``: wait for these only (the others may die on purpose)."""
        for q in self.tasks:
            q.put((module, name, args))
        return self._collect(timeout, ranks)

    def alive(self) -> bool:
        return all(proc.is_alive() for proc in self.procs)

    def kill(self) -> None:
        for proc in self.procs:
            if proc.is_alive():
                proc.kill()
        for proc in self.procs:
            proc.join(5)

    def close(self) -> None:
        for q in self.tasks:
            q.put(None)
        for proc in self.procs:
            proc.join(10)
        self.kill()
