"""The doctor never names a rank as died when its dump is there or it returned normally, and says
"unknown" rather than guess from odd fields (issue 42, finding 7)."""

from __future__ import annotations

import torch
from test_doctor import T0, loop, stuck, write
from test_torchfr import fr_entry, fr_write, steps

import mycollectives as mc
from mycollectives import doctor, virtual
from mycollectives.doctor.__main__ import main


def _healthy_but(d, change, ranks=range(4)):
    for r in range(4):
        entries = steps(6)
        if r in ranks:
            change(entries)
        fr_write(d, r, entries)
    return doctor.diagnose(d)


def test_a_negative_collective_seq_id_is_an_unknown_call_not_a_dead_rank(tmp_path):
    diag = _healthy_but(tmp_path, lambda es: es[0].update(collective_seq_id=-1), ranks=[0])
    assert diag.kind == "ok", diag.line
    assert "died" not in diag.line


def test_a_list_of_lists_for_input_dtypes_is_an_unknown_dtype(tmp_path):
    diag = _healthy_but(tmp_path, lambda es: es[2].update(input_dtypes=[["Float"]]))
    assert diag.kind == "ok", diag.line


def test_an_absurd_rank_in_a_file_name_is_no_rank(tmp_path):
    for r in (0, 1, 2, 3, 99999999999999999999, 7):
        fr_write(tmp_path, r, steps(6))
    diag = doctor.diagnose(tmp_path)
    assert diag.kind == "ok" and "99999999999999999999" not in diag.line, diag.line


def _one_returns(rank):
    mc.all_reduce(torch.ones(4))
    if rank == 1:
        return
    mc.all_reduce(torch.ones(4))


def test_a_virtual_rank_that_returned_is_not_said_to_have_died(tmp_path, monkeypatch):
    monkeypatch.setenv("MYCOLLECTIVES_FLIGHT_DIR", str(tmp_path))
    try:
        virtual.run(_one_returns, world_size=4, timeout=300)
    except mc.DeadlockError:
        pass
    assert sorted(p.name for p in tmp_path.glob("rank*.json")) == [f"rank{r}.json" for r in range(4)]
    diag = doctor.diagnose(tmp_path)
    assert diag.ranks == [1] and "died" not in diag.line, diag.line
    assert diag.kind == "skipped" and "finished" in diag.line, diag.line


# Dumps of two jobs handed over together (issue 42, finding 7): a faulty 4-rank job (rank 1 calls
# another collective at seq 9) whose rank 0 file was overwritten by a healthy 2-rank job's, later.


def _faulty_job_a(d):
    for r in (0, 2, 3):
        write(d, r, [*loop(9), stuck(9, peer=1)], job="jobA")
    write(d, 1, [*loop(9), stuck(9, count=256, peer=0)], job="jobA")


def test_a_file_of_another_job_is_no_dead_rank_and_each_job_is_read_apart(tmp_path):
    _faulty_job_a(tmp_path)
    alone = doctor.diagnose(tmp_path)
    assert alone.ranks == [1] and "rank 1" in alone.line, alone.line
    write(tmp_path, 0, loop(12), reason="exit", job="jobB", world=2, time=T0 + 200)
    diag = doctor.diagnose(tmp_path)
    assert "died" not in diag.line, diag.line
    assert diag.kind == "unknown" and diag.ranks == [1], diag.line  # job B's rank 1: its file is job A's
    ours, theirs = diag.line.split("; also here, read apart, ")
    assert ours.startswith("job jobB (2 ranks; files of rank 0)"), ours
    assert "rank 1 has no record of this job: its file rank1.json holds another job's" in ours, ours
    assert theirs.startswith("job jobA (4 ranks; files of ranks 1-3)"), theirs
    assert alone.line in theirs.replace("ranks 2, 3 called", "ranks 0, 2, 3 called"), theirs
    assert main([str(tmp_path)]) == 1


def test_pytorch_dumps_of_another_world_size_are_read_apart(tmp_path):
    for r in (0, 2, 3):
        fr_write(tmp_path, r, [*steps(9), fr_entry(10, state="scheduled")])
    fr_write(tmp_path, 1, steps(9))  # rank 1 stopped after seq 9
    fr_write(tmp_path, 0, steps(12), world=2)  # another job's rank 0, over the first's
    diag = doctor.diagnose(tmp_path)
    assert "died" not in diag.line and diag.kind == "unknown", diag.line
    assert "rank 1 has no record of this job" in diag.line, diag.line
    assert "also here, read apart, job torch:nccl_trace_rank_ (4 ranks; files of ranks 1-3)" in diag.line
    theirs = diag.line.split("also here, read apart, ")[1]
    assert "rank 1 never reached seq 10" in theirs and "ranks 2, 3 wait for it" in theirs, theirs


def test_two_jobs_under_two_prefixes_each_say_what_they_show(tmp_path):
    for r in (0, 2, 3):
        fr_write(tmp_path, r, [*steps(9), fr_entry(10, state="scheduled")])
    fr_write(tmp_path, 1, steps(9))
    for r in (0, 1):
        fr_write(tmp_path, r, steps(12), world=2, prefix="other_trace_rank_")
    diag = doctor.diagnose(tmp_path)
    assert diag.line.startswith("job torch:other_trace_rank_ (2 ranks; files of ranks 0, 1): no fault found")
    faulty = diag.line.split("also here, read apart, ")[1]
    assert faulty.startswith("job torch:nccl_trace_rank_ (4 ranks; files of ranks 0-3): rank 1 never reached")
