"""The doctor's rules on hand-made flight records: each fault, and the records that must not be blamed.

Every case writes the files a job of four ranks would leave (``rank{R}.json``,
as :mod:`mycollectives.flight.files` writes them), with a loop of three
all-reduces per step, and checks the kind, the rank and the sequence number
the doctor names. ``tests/test_faults.py`` makes the same faults happen for
real under torchrun.
"""

from __future__ import annotations

import json

import pytest

from mycollectives import doctor

T0 = 1_000_000.0
LOOP = [("all_reduce", 4096), ("all_reduce", 1024), ("all_reduce", 256)]


def entry(
    seq, fn="all_reduce", count=4096, state="completed", t=None, peer=None, what=None, error=None, **kw
):
    t = T0 + seq if t is None else t
    e = dict(
        seq=seq,
        kind="collective",
        fn=fn,
        algorithm="ring",
        dtype="float32",
        count=count,
        root=0,
        op="SUM",
        site="/work/train.py:40",
        function="step",
        state=state,
        phase="schedule",
        round=0,
        rounds=6,
        peer=peer,
        what=what,
        t_posted=t,
        t_started=t,
        t_done=None if state != "completed" else t + 0.001,
        error=error,
    )
    e.update(kw)
    if e["error"] is None and state == "failed" and peer is not None:
        e["error"] = "CollectiveTimeout: x"
    return e


def loop(n, **kw):
    """``n`` completed calls of the training loop."""
    return [entry(k, fn, count, **kw) for k, (fn, count) in zip(range(n), LOOP * n)]


def write(d, rank, entries, reason="timeout", stack=None, exit_error=None, job="job1", time=T0 + 100, p2p=()):
    d.mkdir(parents=True, exist_ok=True)
    group = dict(name="default", ranks=[0, 1, 2, 3], rank=rank, size=4, transport="TorchDistTransport")
    group.update(failure=None, entries=list(entries) + list(p2p))
    doc = dict(version=1, job=job, rank=rank, host="h", pid=1, reason=reason, time=time)
    doc.update(exit_error=exit_error, stack=stack, groups=[group])
    (d / f"rank{rank}.json").write_text(json.dumps(doc))


def stuck(seq, fn="all_reduce", count=4096, peer=2, **kw):
    """A call that timed out waiting on ``peer``."""
    return entry(seq, fn, count, **{"state": "failed", "peer": peer, "what": "receive from", **kw})


@pytest.fixture
def d(tmp_path):
    return tmp_path / "flight"


def _check(d, kind, ranks, seq, *words):
    diag = doctor.diagnose(d)
    assert (diag.kind, diag.ranks, diag.seq) == (kind, ranks, seq), diag.line
    for w in words:
        assert w in diag.line, diag.line
    return diag


def test_healthy_run(d):
    for r in range(4):
        write(d, r, loop(9), reason="exit")
    _check(d, "ok", [], None, "no fault found", "seq 0-8")


def test_a_rank_without_a_record_died(d):
    for r in (0, 1, 3):
        write(d, r, [*loop(6), stuck(6, peer=2, error="PeerError: connection closed")])
    _check(d, "died", [2], 6, "rank 2 died", "seq 6")


def test_a_rank_that_exited_after_fewer_calls_skipped_one(d):
    for r in (0, 1, 3):
        write(d, r, [*loop(9), stuck(9, peer=2)])
    write(d, 2, loop(9), reason="exit")
    _check(d, "skipped", [2], 9, "rank 2 skipped a collective", "finished after seq 8")


def test_a_rank_waiting_in_torch_distributed_skipped_one(d):
    for r in (0, 1, 3):
        write(d, r, [*loop(9), stuck(9)])
    stack = [["/venv/torch/distributed/distributed_c10d.py", 10, "barrier"], ["/work/train.py", 60, "main"]]
    write(d, 2, loop(9), reason="SIGTERM", stack=stack)
    _check(d, "skipped", [2], 9, "barrier()")


def test_a_rank_still_in_its_own_code_is_a_straggler(d):
    for r in (0, 1, 3):
        write(d, r, [*loop(9), stuck(9)])
    write(d, 2, loop(9), reason="SIGTERM", stack=[["/work/train.py", 33, "compute"]])
    _check(d, "straggler", [2], 9, "train.py:33 in compute()")


def test_a_rank_that_raised_crashed(d):
    for r in (0, 1, 3):
        write(d, r, [*loop(9), stuck(9)])
    write(d, 2, loop(9), reason="exit", exit_error="RuntimeError: boom at train.py:12 in step()")
    _check(d, "crashed", [2], 9, "RuntimeError: boom")


def test_a_rank_that_called_the_next_collective_skipped_the_expected_one(d):
    for r in (0, 1, 3):
        write(d, r, [*loop(7), entry(7, count=1024, state="failed", error="ValueError: disagree")])
    write(d, 2, [*loop(7), entry(7, count=256, state="failed", error="ValueError: disagree")])
    _check(d, "skipped", [2], 7, "the call that comes next", "1024 float32")


def test_a_rank_that_called_another_collective_of_the_loop_issued_them_in_another_order(d):
    for r in (0, 1, 3):
        write(d, r, [*loop(6), entry(6, count=4096, state="failed")])
    write(d, 2, [*loop(6), entry(6, count=256, state="failed")])
    _check(d, "order", [2], 6, "different order")


def test_an_odd_size_is_a_mismatch_and_an_odd_dtype_too(d):
    for r in (0, 1, 3):
        write(d, r, [*loop(7), entry(7, count=1024, state="failed")])
    write(d, 2, [*loop(7), entry(7, count=1025, state="failed")])
    _check(d, "mismatch", [2], 7, "mismatched sizes", "1025")
    write(d, 2, [*loop(7), entry(7, count=1024, dtype="float64", state="failed")])
    _check(d, "mismatch", [2], 7, "mismatched dtypes", "float64")


def test_one_rank_arriving_long_after_the_others_gave_up_is_a_straggler(d):
    for r in (0, 1, 3):
        write(d, r, [*loop(9), stuck(9, t=T0 + 9, t_done=T0 + 14)])
    late = entry(9, state="failed", t=T0 + 30, error="PeerError: gone", peer=0, what="receive from")
    write(d, 2, [*loop(9), late])
    _check(d, "straggler", [2], 9, "21.0 s after")


def test_a_rank_that_is_late_at_every_step_of_a_finished_run_is_a_straggler(d):
    for r in range(4):
        es = loop(12)
        for e in es:
            if e["seq"] % 3 == 0 and r == 1:
                e["t_posted"] += 0.08  # rank 1 computes 80 ms longer before each step
        write(d, r, es, reason="exit")
    _check(d, "straggler", [1], 9, "rank 1 is a straggler", "80 ms")


def test_no_straggler_in_noise(d):
    import random

    rng = random.Random(0)
    for r in range(4):
        es = loop(30)
        for e in es:
            e["t_posted"] += rng.uniform(0, 0.004)
        write(d, r, es, reason="exit")
    _check(d, "ok", [], None)


def test_point_to_point_deadlock_and_an_unmatched_receive(d):
    def recv(r, peer, state="failed"):
        return dict(entry(0, fn="recv", count=512, state=state, peer=peer, root=peer), kind="p2p")

    for r in (2, 3):
        write(d, r, loop(3), reason="exit")
    write(d, 0, loop(3), p2p=[recv(0, 1)])
    write(d, 1, loop(3), p2p=[recv(1, 0)])
    _check(d, "deadlock", [0, 1], 0, "rank 0 waits in recv from rank 1", "rank 1 waits in recv from rank 0")
    write(d, 1, loop(3), reason="exit")
    _check(d, "unmatched", [0, 1], 0, "never matched", "finished")


def test_the_newest_job_is_read_and_a_parent_directory_of_jobs_works(d):
    for r in range(4):
        write(d / "old", r, loop(9), reason="exit", job="old")
    for r in range(4):
        if r == 2:
            write(
                d / "new", r, loop(4), job="new", reason="SIGTERM", stack=[["/work/train.py", 33, "compute"]]
            )
        else:
            write(d / "new", r, [*loop(4), stuck(4)], job="new")
    write(d / "new", 5, loop(20), reason="exit", job="older-and-bigger")  # a stale file of an earlier run
    for r in range(4):
        e = json.loads((d / "new" / f"rank{r}.json").read_text())
        for x in e["groups"][0]["entries"]:
            x["t_posted"] += 1000.0  # the new job ran later
        (d / "new" / f"rank{r}.json").write_text(json.dumps(e))
    diag = _check(d / "new", "straggler", [2], 4)
    assert any("ignored 1 file" in n for n in diag.details)
    assert doctor.diagnose(d).ranks == [2]  # given the parent, the newest job directory is read


def test_empty_directory(tmp_path):
    diag = doctor.diagnose(tmp_path)
    assert diag.kind == "empty" and "no flight records" in diag.line
    with pytest.raises(FileNotFoundError):
        doctor.diagnose(tmp_path / "missing")
