"""A rank that died in native code (issue 42, finding 7): gloo aborts a rank that receives more
bytes than it posted for (ranks passing different sizes with ``check=False``). It writes no flight
record, or one cut short; its ``rank{R}.native`` (:mod:`mycollectives.flight.native`) says how it
ended and where, and the doctor names the collective it died in, never "died"."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_doctor import T0, loop, stuck, write

from mycollectives import doctor
from mycollectives.doctor.__main__ import main

RANK = Path(__file__).with_name("hostile_abort_rank.py")
ABORT = """terminate called after throwing an instance of 'gloo::EnforceNotMet'
Fatal Python error: Aborted

Thread 0x00007f1e1c9fe6c0 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 324 in wait

Thread 0x00007f1eb4bc5b80 (most recent call first):
  File "{pkg}/transport/torch_dist.py", line 179 in wait
  File "{pkg}/api/gather.py", line 50 in all_gather_into_tensor
  File "/x/site-packages/torch/utils/_contextlib.py", line 124 in decorate_context
  File "/work/train.py", line 40 in step
  File "/work/train.py", line 88 in <module>

Extension modules: numpy._core._multiarray_umath, torch._C (total: 2)
"""


def _native(d: Path, rank: int, text: str | None = None) -> Path:
    import mycollectives

    pkg = str(Path(mycollectives.__file__).parent)
    path = d / f"rank{rank}.native"
    path.write_text(text if text is not None else ABORT.format(pkg=pkg))
    return path


def _job(d: Path) -> None:
    """Ranks 0, 1, 3 lost rank 2 at seq 9 (an all-reduce at train.py:40); rank 2 left no record."""
    for r in (0, 1, 3):
        write(d, r, [*loop(9), stuck(9, peer=2, error="PeerError: connection reset")], started=T0 - 10)


def test_a_rank_that_aborted_in_native_code_is_named_with_its_call(tmp_path):
    _job(tmp_path)
    assert doctor.diagnose(tmp_path).kind == "died"  # no trace of it: died is all that can be said
    _native(tmp_path, 2)
    diag = doctor.diagnose(tmp_path)
    assert (diag.kind, diag.ranks, diag.seq) == ("aborted", [2], 9), diag.line
    assert diag.line.startswith("rank 2 aborted in native code (Fatal Python error: Aborted; rank2.native)")
    assert "at train.py:40 in step()" in diag.line and "rank 0 passed 4096 float32" in diag.line, diag.line
    assert "died" not in diag.line
    whole = (tmp_path / "rank0.json").read_text()
    (tmp_path / "rank2.json").write_text(whole[: len(whole) // 2])  # its record cut short as it died
    assert doctor.diagnose(tmp_path).kind == "aborted", doctor.diagnose(tmp_path).line


def test_a_stale_or_odd_native_file_is_no_evidence(tmp_path, capsys):
    _job(tmp_path)
    old = _native(tmp_path, 2)
    os.utime(old, (T0 - 3600, T0 - 3600))  # an earlier run's
    assert doctor.diagnose(tmp_path).kind == "died"
    for junk in ("", "hello\n", "Fatal Python error: Segmentation fault\n\x00\xff garbage"):
        _native(tmp_path, 2, junk)
        os.utime(tmp_path / "rank2.native", (T0, T0))
        diag = doctor.diagnose(tmp_path)
        assert diag.kind in ("died", "aborted") and diag.ranks == [2], diag.line
    assert "Segmentation fault" in diag.line and "likely cause" not in diag.line, diag.line
    (tmp_path / "rank2.native").write_bytes(b"\x80\x04garbage\xff" * 100)
    assert main([str(tmp_path)]) == 1
    assert "rank 2" in capsys.readouterr().out


@pytest.mark.multiprocess
@pytest.mark.timeout(240)
def test_gloo_aborting_a_rank_on_a_size_mismatch_with_check_off(tmp_path):
    flight, store = tmp_path / "flight", tmp_path / "store"
    env = dict(os.environ, TORCHELASTIC_RUN_ID="native", MYCOLLECTIVES_FLIGHT_DIR=str(flight))
    env.update(MYCOLLECTIVES_TIMEOUT="30", WORLD_SIZE="2")
    procs = [
        subprocess.Popen(
            [sys.executable, str(RANK), str(r), "2", str(store), "1"],
            env={**env, "RANK": str(r)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for r in range(2)
    ]
    try:
        errs = [p.communicate(timeout=180)[1] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert procs[0].returncode == -6 and "Received data size" in errs[0], errs[0][-2000:]
    assert procs[1].returncode == 1, errs[1][-2000:]
    assert sorted(f.name for f in flight.iterdir()) == ["rank0.native", "rank1.json"]  # rank 1's: removed
    diag = doctor.diagnose(flight)
    assert (diag.kind, diag.ranks, diag.seq) == ("aborted", [0], 2), diag.line
    assert "rank 1 passed 257 float32" in diag.line and "hostile_abort_rank.py:26" in diag.line, diag.line
    assert "died" not in diag.line, diag.line
