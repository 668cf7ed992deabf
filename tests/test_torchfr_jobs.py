"""The doctor on real PyTorch Flight Recorder dumps: plain torch.distributed jobs under torchrun on gloo.

``labs/scripts/torchfr_faults.py`` calls nothing of the package; PyTorch's
recorder is on (``TORCH_FR_BUFFER_SIZE``) and each rank writes its dump when
a collective fails, on SIGTERM, at a deadline or at the end. Rank ``bad``
misbehaves at step 3 (seq 13-16). Gloo itself aborts a process that
receives a message of the wrong size, so a skipped or reordered call can
end with the receiving rank dead: the doctor must still name the faulty rank.
"""

from __future__ import annotations

import pytest

from labs.scripts.torchfr_compare import run_job
from mycollectives import doctor

# fault -> (kinds allowed, seq or None, words the line must hold); rank 2 must be named first
TRUTH = {
    "none": ({"ok"}, None, "no fault found"),
    "skip": ({"skipped", "died", "mismatch"}, 14, "rank 2"),
    "extra": ({"extra", "died", "mismatch"}, 15, "rank 2"),
    "order": ({"order", "died", "mismatch"}, 13, "rank 2"),
    "size": ({"mismatch"}, 14, "rank 2 passed 1025 float32"),
    "dtype": ({"mismatch"}, 14, "rank 2 passed 1024 float64"),
    "collective": ({"mismatch"}, 14, "rank 2 called a different collective"),
    # rank 2 broadcasts from root 1 where the others use root 0: which ranks are left in the call
    # (stuck at seq 16), or finish it and stop before seq 17, depends on timing (rank 0 may wait on its
    # send to rank 2), and the dumps record no roots: the doctor names some of ranks 0-2, with the hint
    "root": ({"stuck", "straggler"}, (16, 17), "record no roots"),
    "op": ({"ok"}, None, "no fault found"),  # the dumps record no reduce ops: nothing to see
    "straggler": ({"straggler"}, 14, "rank 2 never reached seq 14"),
    "hang": ({"straggler"}, 14, "rank 2 never reached seq 14"),
    "die": ({"died"}, (12, 13), "rank 2 died"),  # 12 where rank 2 died relaying the broadcast
    # rank 2 raised right after the broadcast of seq 12; gloo may not have counted that broadcast
    # as completed when rank 2 wrote its dump: it is then named as not completing seq 12
    "crash": ({"straggler", "stuck"}, (12, 13), "rank 2"),
    "slow": ({"straggler"}, None, "rank 2 is a straggler"),
}


@pytest.mark.multiprocess
@pytest.mark.timeout(200)
@pytest.mark.parametrize("fault", list(TRUTH))
def test_the_doctor_names_the_faulty_rank_from_pytorchs_dumps(fault, tmp_path):
    healthy = fault in ("none", "op", "slow")  # a long timeout: a loaded machine must not fail them
    proc = run_job(fault, tmp_path, steps=8, timeout=30.0 if healthy else 5.0)
    assert (proc.returncode == 0) == healthy, proc.stderr[-2000:]
    diag = doctor.diagnose(tmp_path)
    kinds, seq, words = TRUTH[fault]
    assert diag.kind in kinds and words in diag.line, diag.line
    if fault == "root":
        assert diag.ranks and set(diag.ranks) <= {0, 1, 2}, diag.line
    elif diag.kind == "stuck":
        assert 2 in diag.ranks, diag.line
    elif diag.kind != "ok":
        assert diag.ranks == [2] and "rank 2" in diag.line, diag.line
    if seq is not None:
        assert diag.seq in (seq if isinstance(seq, tuple) else (seq,)), diag.line


@pytest.mark.multiprocess
@pytest.mark.timeout(200)
@pytest.mark.parametrize(
    "fault, kinds", [("crash", {"straggler", "stuck"}), ("hang", {"straggler"}), ("die", {"died"})]
)
def test_two_ranks_and_the_json_dump(fault, kinds, tmp_path):
    proc = run_job(fault, tmp_path, nproc=2, bad=1, as_json=True)
    assert proc.returncode != 0, proc.stderr[-2000:]
    assert sorted(p.name for p in tmp_path.iterdir())[0].startswith("nccl_trace_json_rank_")
    diag = doctor.diagnose(tmp_path)
    assert diag.kind in kinds and diag.ranks == [1] and "rank 1" in diag.line, diag.line
