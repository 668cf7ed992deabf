"""The multi-process tests' pools: one :class:`mycollectives.GlooPool` per world size.

A task is a function of a module of this test folder (``dist_tasks``,
``dropin_tasks``), named by module and name, called as ``fn(rank, *args)``
on every rank; each rank's result (or its exception, as text) comes back. A
task that does not finish within its timeout kills the pool, and the test
fails instead of hanging.
"""

from __future__ import annotations

import importlib

from mycollectives.transport.gloo import GlooPool


class Pool(GlooPool):
    def run(self, module: str, name: str, *args, timeout: float = 120, ranks=None) -> list:
        """Run ``module.name(rank, *args)`` on every rank; ``[(status, value)]`` in rank order."""
        fn = getattr(importlib.import_module(module), name)
        return super().run(fn, *args, timeout=timeout, ranks=ranks)
