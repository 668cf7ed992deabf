"""Chapter 6's hang procedure, step 4, followed word for word on gloo.

The job (``tests/gloo_hang_job.py``) is a plain torch.distributed loop the
book's labs did not write: three ranks under torchrun, rank 1 stuck in its
own code, dead, or skipping a call at step 2. The chapter says: on gloo a
timed-out collective raises gloo's "Timed out waiting ... for recv operation"
(step 3); set ``TORCH_FR_BUFFER_SIZE`` and ``TORCH_FR_DUMP_TEMP_FILE`` (or
leave the default under ``$XDG_CACHE_HOME``), install the dump handler before
``init_process_group`` and call it in a ``finally``, then run ``python -m
mycollectives.doctor DIR``; ``torchfrtrace`` stops on gloo's dumps, and its
"Missing dump files from ranks" names a rank that died, which after a skipped
call may be a victim that gloo aborted on a size mismatch rather than the
rank at fault. Each test checks the dumps appear where the page says and
that gloo, the doctor and torchfrtrace say what the page promises.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(300)]


def run_job(mode: str, env: dict, group_timeout_s: int = 5) -> subprocess.CompletedProcess:
    cmd = [
        str(BIN / "torchrun"),
        "--standalone",
        "--nproc-per-node",
        "3",
        str(ROOT / "tests/gloo_hang_job.py"),
    ]
    unset = ("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE", "XDG_CACHE_HOME")
    base = {k: v for k, v in os.environ.items() if k not in unset}
    env = {**base, "PYTHONPATH": str(ROOT), "TORCH_FR_BUFFER_SIZE": "2000", **env}
    return subprocess.run(
        [*cmd, str(group_timeout_s), mode], env=env, capture_output=True, text=True, timeout=240
    )


def doctor(where: Path) -> str:
    cli = [sys.executable, "-m", "mycollectives.doctor", str(where)]
    out = subprocess.run(
        cli, capture_output=True, text=True, timeout=60, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}
    )
    return out.stdout.splitlines()[0]


def torchfrtrace(where: Path) -> subprocess.CompletedProcess:
    cmd = [str(BIN / "torchfrtrace"), str(where), "-p", "comm_lib_trace_rank_"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def test_a_hung_rank_is_named_from_the_dumps_the_handler_writes(tmp_path):
    fr = tmp_path / "fr"
    proc = run_job("hang", {"TORCH_FR_DUMP_TEMP_FILE": f"{fr}/comm_lib_trace_rank_"})
    assert proc.returncode != 0, proc.stderr[-2000:]
    assert "Timed out waiting 5000ms for recv operation to complete" in proc.stderr, proc.stderr[-2000:]
    assert sorted(p.name for p in fr.iterdir()) == [f"comm_lib_trace_rank_{r}" for r in range(3)]
    line = doctor(fr)
    assert line.startswith("rank 1 never reached seq 7 (all_reduce"), line
    assert "ranks 0, 2 wait for it" in line, line
    analyzer = torchfrtrace(fr)
    assert analyzer.returncode != 0 and "KeyError" in analyzer.stderr, analyzer.stderr[-2000:]


def test_a_dead_rank_writes_no_dump_and_torchfrtrace_names_it(tmp_path):
    cache = tmp_path / "cache"  # no TORCH_FR_DUMP_TEMP_FILE: the default under XDG_CACHE_HOME
    proc = run_job("die", {"XDG_CACHE_HOME": str(cache)})
    assert proc.returncode != 0, proc.stderr[-2000:]
    fr = cache / "torch"
    assert sorted(p.name for p in fr.iterdir()) == ["comm_lib_trace_rank_0", "comm_lib_trace_rank_2"]
    line = doctor(fr)
    assert "rank 1" in line and "died" in line, line
    analyzer = torchfrtrace(fr)
    assert "Missing dump files from ranks {1}" in analyzer.stderr, analyzer.stderr[-2000:]


def test_a_skipped_call_ends_the_job_and_the_doctor_names_the_skipper_not_the_victim(tmp_path):
    fr = tmp_path / "fr"
    # a 60 s group timeout: a job that waited for it would print gloo's "Timed out waiting"
    proc = run_job("skip", {"TORCH_FR_DUMP_TEMP_FILE": f"{fr}/comm_lib_trace_rank_"}, group_timeout_s=60)
    assert proc.returncode != 0, proc.stderr[-2000:]
    assert "Received data size doesn't match expected size" in proc.stderr, proc.stderr[-2000:]
    assert "Timed out waiting" not in proc.stderr, proc.stderr[-2000:]
    written = sorted(int(p.name.rsplit("_", 1)[1]) for p in fr.iterdir())
    missing = sorted(set(range(3)) - set(written))
    assert len(missing) == 1 and missing != [1], written  # a victim died, not the rank that skipped
    line = doctor(fr)
    assert line.startswith("rank 1 skipped a collective"), line
    assert f"no record from rank {missing[0]}, which the fault may have stopped" in line, line
    analyzer = torchfrtrace(fr)
    assert f"Missing dump files from ranks {{{missing[0]}}}" in analyzer.stderr, analyzer.stderr[-2000:]
