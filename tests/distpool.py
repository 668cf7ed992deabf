"""The multi-process tests' pools: one :class:`mycollectives.GlooPool` per world size.

A task is a function of ``dist_tasks``, named by its name, called as
``fn(rank, *args)`` on every rank; each rank's result (or its exception, as
text) comes back. A task that does not finish within its timeout kills the
pool, and the test fails instead of hanging.
"""

from __future__ import annotations

import dist_tasks

from mycollectives.transport.gloo import GlooPool


class Pool(GlooPool):
    def run(self, module: str, name: str, *args, timeout: float = 120, ranks=None) -> list:
        """Run ``dist_tasks.name(rank, *args)`` on every rank; ``[(status, value)]`` in rank order."""
        assert module == "dist_tasks", module
        return super().run(getattr(dist_tasks, name), *args, timeout=timeout, ranks=ranks)
