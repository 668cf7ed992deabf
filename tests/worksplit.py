"""The order of the tests, and how ``make test`` splits them between its pytest-xdist workers.

Pools: a test that runs its tasks on a module's pool of gloo processes of
world size p is marked ``pool(p)``. Within a module, the tests of one pool
run one after the other (a module keeps one pool alive at a time, and
starting one costs a torch import per process), in the order their pools
first appear; a test that kills its pool (the group saw a fault) comes last
in its pool's run, in file order.

Work units (``--dist loadgroup``, scheduled by :class:`Units`): a file is
one unit, run on one worker, so its pools start once, as under ``--dist
loadfile``, except:

* ``SPLIT``: the matrix of a file at the world sizes listed, each a unit of
  its own (parametrized ``p``, the first value of its id); no pool starts
  twice, and no unit is so long that it sets the run's tail;
* ``ONE_JOB_EACH``: files whose every test is one torchrun job sharing
  nothing with the others: each test is a unit, and they come last, so
  the worker that is free takes the next and the workers end together.

The units start longest first (``LONGEST``: worker-seconds measured on the
project's 2-core machine, benchmarks/README.md "The test suite's time"); the
others follow in collection order, then the torchrun jobs.
"""

from __future__ import annotations

import re

import pytest

# file -> {world size: part}: its tests parametrized with that p first; the others are part "rest"
SPLIT = {"tests/test_dist.py": {8: "p8", 5: "p5"}}
ONE_JOB_EACH = ("tests/test_torchfr_jobs.py", "tests/test_faults.py")
# longest first; what is not listed is shorter (under 60 worker-seconds)
LONGEST = (
    "tests/test_dist.py:rest",
    "tests/test_dist.py:p8",
    "tests/test_browser.py",
    "tests/test_dist.py:p5",
    "tests/test_dropin.py",
    "tests/test_labs.py",
    "tests/test_local.py",
)


def pool_of(item: pytest.Item) -> int | None:
    mark = item.get_closest_marker("pool")
    return mark.args[0] if mark else None


def by_pool(items: list[pytest.Item]) -> list[pytest.Item]:
    """``items`` with each module's tests of one pool together, where that pool first appears."""
    first: dict[tuple[str, int | None], int] = {}
    for i, item in enumerate(items):
        first.setdefault((item.nodeid.split("::")[0], pool_of(item)), i)
    return sorted(items, key=lambda item: first[(item.nodeid.split("::")[0], pool_of(item))])


def unit(nodeid: str) -> str:
    """The work unit of the test ``nodeid`` (the scheduler sees only node ids)."""
    path = nodeid.split("::")[0]
    if path in ONE_JOB_EACH:
        return nodeid
    if path in SPLIT:
        p = re.search(r"\[(\d+)[-\]]", nodeid)
        return f"{path}:{SPLIT[path].get(int(p[1]) if p else None, 'rest')}"
    return path


def units(items: list[pytest.Item]) -> list[pytest.Item]:
    """``items`` in the order of their units, longest first; checks that a split
    file's tests run on the pool of their part (its ``pool`` marker)."""
    for item in items:
        path = item.nodeid.split("::")[0]
        if (
            path in SPLIT
            and pool_of(item) in SPLIT[path]
            and unit(item.nodeid) != f"{path}:{SPLIT[path][pool_of(item)]}"
        ):
            raise pytest.UsageError(
                f"{item.nodeid} runs on pool {pool_of(item)}: parametrize it by p (worksplit.py)"
            )

    def rank(item: pytest.Item) -> int:
        name = unit(item.nodeid)
        if name in LONGEST:
            return LONGEST.index(name)
        return len(LONGEST) + (name.split("::")[0] in ONE_JOB_EACH)

    return sorted(items, key=rank)  # stable: collection order within each rank


def scheduler(config, log):
    """xdist's scope scheduling with :func:`unit` as the scope, and the units
    in collection order (as ``--no-loadscope-reorder``): the order of :func:`units`."""
    from xdist.scheduler import LoadScopeScheduling

    config.option.loadscopereorder = False

    class Units(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit(nodeid)

    return Units(config, log)
