"""The multi-process tests' pools: one :class:`mycollectives.GlooPool` per world size.

A task is a function of a module of this test folder (``dist_tasks``,
``dropin_tasks``), named by module and name, called as ``fn(rank, *args)``
on every rank; each rank's result (or its exception, as text) comes back. A
task that does not finish within its timeout kills the pool, and the test
fails instead of hanging.
"""

from __future__ import annotations

import importlib
import time

from mycollectives.transport.launcher import GlooPool


class Pool(GlooPool):
    def run(self, module: str, name: str, *args, timeout: float = 120, ranks=None) -> list:
        """Run ``module.name(rank, *args)`` on every rank; ``[(status, value)]`` in rank order."""
        fn = getattr(importlib.import_module(module), name)
        return super().run(fn, *args, timeout=timeout, ranks=ranks)

    def exit_codes(self, module: str, name: str, *args, timeout: float = 120) -> list[int | None]:
        """Run ``module.name(rank, *args)`` on every rank, for a task that ends its
        process; each rank's exit code once every process has ended, or ``None``
        for a rank still running after ``timeout`` seconds (the pool is then
        killed). Waits for the processes, not for results they never send."""
        fn = getattr(importlib.import_module(module), name)
        for q in self.tasks:
            q.put((fn, args))
        deadline = time.monotonic() + timeout
        for proc in self.procs:
            proc.join(max(0.0, deadline - time.monotonic()))
        codes = [proc.exitcode for proc in self.procs]
        self.kill()
        return codes


class Pools:
    """The pools of one test module, all running ``module``'s tasks; one alive at a
    time (two cores): asking for world size ``p`` closes the others."""

    def __init__(self, module: str):
        self.module = module
        self._pools: dict[int, Pool] = {}

    def __call__(self, p: int) -> Pool:
        for q in [q for q in self._pools if q != p]:
            self._pools.pop(q).close()
        if p not in self._pools or not self._pools[p].alive():
            self._pools[p] = Pool(p)
        return self._pools[p]

    def run(self, p: int, name: str, *args, timeout: float = 120, ranks=None) -> list:
        """``[(status, value)]`` of task ``name`` on every rank of world size ``p``."""
        return self(p).run(self.module, name, *args, timeout=timeout, ranks=ranks)

    def everywhere(self, p: int, name: str, *args, timeout: float = 120) -> list:
        """Every rank's value of task ``name``; fails naming each rank whose task raised."""
        out = self.run(p, name, *args, timeout=timeout)
        errors = [f"rank {r}: {v}" for r, (status, v) in enumerate(out) if status != "ok"]
        assert not errors, "\n".join(errors)
        return [v for _, v in out]

    def kill(self, p: int) -> None:
        """Kill world size ``p``'s pool (a task left its group broken); the next call starts afresh."""
        pool = self._pools.pop(p, None)
        if pool is not None:
            pool.kill()

    def close(self) -> None:
        for pool in self._pools.values():
            pool.close()
        self._pools.clear()


def outcome(call) -> str:
    """What ``call()`` did, as a task reports it: "ok", or the error's class and message."""
    try:
        call()
    except Exception as e:  # noqa: BLE001 - the test reads the class and the message
        return f"{type(e).__name__}: {e}"
    return "ok"
