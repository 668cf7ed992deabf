"""Faults injected into a training loop under torchrun (gloo, four CPU processes), each diagnosed by the doctor.

``labs/scripts/faults.py`` runs three all-reduces and an all-gather per step
(seq 4s to 4s+3 at step s) and a send/recv between ranks 0 and 1; rank 2
misbehaves at step 3 (seq 12 on). The doctor must name the fault, the rank
and the sequence number from the ranks' flight records alone. The same script
runs on NCCL on a GPU node (chapter 6).
"""

from __future__ import annotations

import pytest

from labs.scripts.faults import inject

# fault -> (kind, ranks, seq, words the line must hold)
TRUTH = {
    "none": ("ok", [], None, "no fault found"),
    "skip": ("skipped", [2], 13, "rank 2 skipped a collective"),
    "order": ("order", [2], 12, "different order"),
    "size": ("mismatch", [2], 13, "rank 2 passed 1025 float32"),
    "dtype": ("mismatch", [2], 13, "rank 2 passed 1024 float64"),
    "straggler": ("straggler", [2], 12, "rank 2 is a straggler"),
    "die": ("died", [2], 12, "rank 2 died"),
    "crash": ("crashed", [2], 12, "injected error"),
    "deadlock": ("deadlock", [0, 1], 6, "rank 0 waits in recv from rank 1"),
}


@pytest.mark.multiprocess
@pytest.mark.timeout(200)
@pytest.mark.parametrize("fault", list(TRUTH))
def test_the_doctor_names_the_fault_the_rank_and_the_sequence_number(fault, tmp_path, monkeypatch):
    monkeypatch.setenv("MYCOLLECTIVES_DEVICE", "cpu")
    proc, diag = inject(fault, tmp_path / "flight", nproc=4, timeout_s=5.0)
    assert (proc.returncode == 0) == (fault == "none"), proc.stderr[-3000:]
    kind, ranks, seq, words = TRUTH[fault]
    assert (diag.kind, diag.ranks) == (kind, ranks), diag.line
    if seq is not None:
        assert diag.seq == seq, diag.line
    assert words in diag.line, diag.line


@pytest.mark.multiprocess
@pytest.mark.timeout(200)
def test_a_rank_slower_at_every_step_is_found_in_a_run_that_finished(tmp_path, monkeypatch):
    monkeypatch.setenv("MYCOLLECTIVES_DEVICE", "cpu")
    proc, diag = inject("slow", tmp_path / "flight", nproc=4, steps=8)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (diag.kind, diag.ranks) == ("straggler", [2]), diag.line


# Faults chapter 6 does not list: fault -> (step, kind, ranks, seq, words the line must hold)
UNLISTED = {
    "extra": (3, "extra", [2], 14, "rank 2 issued an extra collective"),
    "send": (3, "unmatched", [2, 3], 0, "rank 2 waits in send to rank 3"),
    "last": (5, "skipped", [2], 23, "rank 2 skipped a collective"),
}


@pytest.mark.multiprocess
@pytest.mark.timeout(200)
@pytest.mark.parametrize("fault", list(UNLISTED))
def test_the_doctor_names_faults_the_chapter_does_not_list(fault, tmp_path, monkeypatch):
    monkeypatch.setenv("MYCOLLECTIVES_DEVICE", "cpu")
    step, kind, ranks, seq, words = UNLISTED[fault]
    proc, diag = inject(fault, tmp_path / "flight", nproc=4, step=step, timeout_s=5.0)
    assert proc.returncode != 0, proc.stderr[-3000:]
    assert (diag.kind, diag.ranks, diag.seq) == (kind, ranks, seq), diag.line
    assert words in diag.line, diag.line
