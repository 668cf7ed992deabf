"""Chapter 5's strategies on real gloo process groups, and under torchrun.

The same checks as ``test_parallel.py`` (:mod:`mycollectives.book.parallel.checks`),
each rank a process: collectives over ``torch.distributed``'s point-to-point
messages, subgroups through tags, FSDP's stream a second thread talking at
once with the main one.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import mycollectives as mc
from mycollectives.book.parallel import checks

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(300)]
ROOT = Path(__file__).resolve().parents[1]
TOL = 1e-9


@pytest.fixture(scope="module", params=[2, 4], ids=["2 processes", "4 processes"])
def pool(request):
    with mc.GlooPool(request.param) as p:
        yield p


def run(pool, fn, *args):
    out = pool.run(fn, *args, timeout=120)
    bad = [(r, v) for r, (s, v) in enumerate(out) if s != "ok"]
    assert not bad, f"rank {bad[0][0]} raised: {bad[0][1]}"
    return [v for _, v in out]


@pytest.mark.parametrize(
    "fn, args",
    [
        (checks.check_dp, ()),
        (checks.check_dp, (True,)),
        (checks.check_fsdp, (1,)),
        (checks.check_fsdp, (2,)),
        (checks.check_tp, ()),
        (checks.check_sp, ()),
        (checks.check_cp, ("ring",)),
        (checks.check_ep, ()),
        (checks.check_ep, (2, True)),
        (checks.check_pp, ()),
    ],
    ids=["dp", "dp overlapped", "fsdp", "hsdp", "tp", "sp", "cp ring", "ep", "ep hierarchical", "pp"],
)
def test_strategy_on_gloo_matches_the_reference(pool, fn, args):
    errs = run(pool, fn, *args)
    assert checks.worst(errs) < TOL, errs


def test_collective_matmul_on_gloo_agrees_and_is_timed(pool):
    from mycollectives.parallel import overlap

    per_rank = run(pool, overlap.time_variants, 64, 32, 16, 2)  # checks the three agree, then times them
    summary = overlap.summarize(per_rank)
    assert set(summary) == set(overlap.VARIANTS) | {"matmul alone", "all-gather alone"}
    assert all(t > 0 for t in summary.values())


@pytest.mark.timeout(300)
def test_every_check_under_torchrun():
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=4"]
    cmd += ["-m", "mycollectives.book.parallel.checks"]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=280)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = [ln for ln in proc.stdout.splitlines() if "largest difference" in ln]
    assert len(lines) == len(checks.suite(4)), proc.stdout
