"""Shared test helpers, and the markers that say what a test needs.

Markers (``pyproject.toml``): ``multiprocess`` (starts processes: gloo
groups, torchrun, the bench's subprocesses), ``book`` (executes the book's
notebooks), ``browser`` (drives Chromium), ``gpu`` (needs CUDA; skipped
with that reason on a machine without one). ``make test-fast`` runs every
test but the book's and the browser's. The markers are held complete: a test
that starts a process without being marked ``multiprocess``, ``book`` or
``browser`` fails, saying so.
"""

from __future__ import annotations

import json
import multiprocessing.process
import os
import subprocess

import numpy as np
import pytest
import worksplit

import mycollectives as mc
from mycollectives.algorithms import uses
from mycollectives.collectives import collectives


def menu() -> list[tuple[str, str]]:
    """Every (collective, algorithm) of the menu now (a toy registered since included)."""
    return [(c, a) for c in collectives() for a in mc.algorithms(c)]


MENU = menu()  # the menu at collection, for parametrize (tests of a toy call menu())
STARTS_PROCESSES = ("multiprocess", "book", "browser")


@pytest.fixture(autouse=True)
def _processes_only_where_marked(request, monkeypatch):
    """Refuse to start a process in a test not marked for it."""
    if any(request.node.get_closest_marker(m) for m in STARTS_PROCESSES):
        return

    def refuse(*args, **kwargs):
        raise AssertionError(
            f"{request.node.nodeid} starts a process: mark it @pytest.mark.multiprocess "
            "(or book, or browser), so that `make test-fast` and the markers tell the truth"
        )

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse)
    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", refuse)


def pytest_collection_modifyitems(config, items):
    """Skip the GPU tests without a GPU; run the tests of one process pool
    together; under ``--dist loadgroup``, in the order of their work units."""
    import torch

    if not torch.cuda.is_available():
        skip = pytest.mark.skip(reason="needs a CUDA GPU (none on this machine)")
        for item in items:
            if item.get_closest_marker("gpu"):
                item.add_marker(skip)
    items[:] = worksplit.by_pool(items)
    if getattr(config.option, "loadgroup", False):  # an xdist worker of `--dist loadgroup`
        items[:] = worksplit.units(items)


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadgroup``: the work units of tests/worksplit.py (no xdist_group marker is used)."""
    if config.getvalue("dist") == "loadgroup":
        return worksplit.scheduler(config, log)
    return None


def pytest_runtest_setup(item):
    """Each test's xdist worker, in the JUnit report (tests/report.py sums each worker's time)."""
    item.user_properties.append(("worker", os.environ.get("PYTEST_XDIST_WORKER", "main")))


_NBVAL: dict[str, tuple[int, int]] = {}  # page -> (code cells executed, outputs compared), test_outputs.py


def pytest_runtest_logreport(report):
    """Collect what test_outputs.py checked (it records it per page; xdist passes it on)."""
    if report.when == "call" and report.passed:
        for name, value in report.user_properties:
            if name == "nbval":
                page, cells, compared = json.loads(value)
                _NBVAL[page] = (cells, compared)


def pytest_terminal_summary(terminalreporter):
    """After a run over the built book: how many pages, cells and outputs nbval checked."""
    if not _NBVAL:
        return
    import outputs

    write = terminalreporter.write_line
    cells = sum(c for c, _ in _NBVAL.values())
    compared = sum(k for _, k in _NBVAL.values())
    write(
        f"nbval, on the notebooks the book build executed: {len(_NBVAL)} of {len(outputs.pages())} pages passed, "
        f"{cells} code cells executed without error, {compared} checked outputs equal to tests/expected_outputs/"
    )


def local_size_for(p: int) -> int:
    """A node size that divides p and gives more than one node where possible."""
    return next(ls for ls in (2, 3, 1) if p % ls == 0)


def options_for(collective: str, algorithm: str, p: int, segment: int = 2) -> dict:
    """The Spec options ``algorithm`` reads, set to small values that exercise them."""
    reads = uses(collective, algorithm)
    return {
        **({"segment": segment} if "segment" in reads else {}),
        **({"local_size": local_size_for(p)} if "local_size" in reads else {}),
    }


def random_splits(rng: np.random.Generator, p: int, high: int = 4) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(int(x) for x in row) for row in rng.integers(0, high, (p, p)))
