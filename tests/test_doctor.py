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


def write(
    d, rank, entries, reason="timeout", stack=None, exit_error=None, job="job1", time=T0 + 100, p2p=(), **kw
):
    """Rank ``rank``'s file; ``sub`` (a list of entries) adds a group of ranks 0 and 1."""
    d.mkdir(parents=True, exist_ok=True)
    world = kw.get("world", 4)
    group = dict(
        name="default", ranks=list(range(world)), rank=rank, size=world, transport="TorchDistTransport"
    )
    group.update(failure=None, entries=list(entries) + list(p2p))
    groups = [group]
    if kw.get("sub") is not None:
        groups.append(dict(name="1", ranks=[0, 1], rank=rank, size=2, failure=None, entries=kw["sub"]))
    doc = dict(version=1, job=job, rank=rank, host="h", pid=1, reason=reason, time=time)
    doc.update(exit_error=exit_error, stack=stack, groups=groups, exit_stack=kw.get("exit_stack"))
    doc.update({k: kw[k] for k in ("run", "started") if k in kw})
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
    step = [*LOOP, ("all_gather_into_tensor", 1)]  # four calls a step, as in labs/scripts/faults.py
    done = [entry(k, fn, count) for k, (fn, count) in enumerate(step * 2)]
    for r in (0, 1, 3):
        write(d, r, [*done, entry(8, count=4096, state="failed")])
    write(d, 2, [*done, entry(8, count=256, state="failed")])  # the buckets in reverse
    _check(d, "order", [2], 8, "different order")


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
    assert any("ignored 1 older run" in n and "1 file(s)" in n for n in diag.details), diag.details
    assert doctor.diagnose(d).ranks == [2]  # given the parent, the newest job directory is read


def test_empty_directory(tmp_path):
    diag = doctor.diagnose(tmp_path)
    assert diag.kind == "empty" and "no flight records" in diag.line
    with pytest.raises(FileNotFoundError):
        doctor.diagnose(tmp_path / "missing")


# Faults the chapter does not list (issue 24): each as the files its run under torchrun left.

STEP = [*LOOP, ("all_gather_into_tensor", 1)]  # four calls a step, as in labs/scripts/faults.py


def steps(n, **kw):
    """``n`` completed calls of a loop of four calls a step."""
    return [entry(k, fn, count, **kw) for k, (fn, count) in zip(range(n), STEP * n)]


def test_a_rank_that_calls_another_collective_at_the_same_point(d):
    for r in (0, 1, 3):
        write(d, r, [*steps(9), entry(9, count=1024, state="failed")])
    write(d, 2, [*steps(9), entry(9, fn="broadcast", count=1024, state="failed")])
    _check(d, "mismatch", [2], 9, "rank 2 called a different collective", "broadcast of 1024")


@pytest.mark.parametrize("field, value, words", [("op", "MAX", "reduce ops"), ("root", 1, "roots")])
def test_another_reduce_op_or_root_is_a_mismatch(d, field, value, words):
    for r in (0, 1, 3):
        write(d, r, [*steps(9), entry(9, count=1024, state="failed")])
    write(d, 2, [*steps(9), entry(9, count=1024, state="failed", **{field: value})])
    _check(d, "mismatch", [2], 9, f"mismatched {words}", f"rank 2 passed {field} {value}")


def test_a_rank_that_repeats_a_call_issued_an_extra_collective(d):
    for r in (0, 1, 3):
        write(d, r, [*steps(10), entry(10, count=256, state="failed")])
    write(d, 2, [*steps(10), entry(10, count=1024, state="failed")])  # its seq 9 again
    _check(d, "extra", [2], 10, "rank 2 issued an extra collective", "again")


def test_an_extra_call_after_the_others_finished(d):
    for r in (0, 1, 3):
        write(d, r, steps(12), reason="exit")
    write(d, 2, [*steps(12), entry(12, count=1024, state="failed", error="PeerError: closed")])
    _check(d, "extra", [2], 12, "rank 2 issued an extra collective", "ranks 0, 1, 3 never called")


def test_two_ranks_that_skip_the_same_call_split_the_ranks_evenly_and_history_decides(d):
    for r in (0, 3):
        write(d, r, [*steps(9), entry(9, count=1024, state="failed")])
    for r in (1, 2):
        write(d, r, [*steps(9), entry(9, count=256, state="failed")])
    _check(d, "skipped", [1, 2], 9, "ranks 1, 2 skipped a collective", "rank 1 called", "rank 2 called")


def test_two_ranks_wrong_in_different_ways_are_both_named(d):
    for r in (0, 3):
        write(d, r, [*steps(9), entry(9, count=1024, state="failed")])
    write(d, 1, [*steps(9), entry(9, count=256, state="failed")])
    write(d, 2, [*steps(9), entry(9, count=1025, state="failed")])
    _check(d, "several", [1, 2], 9, "rank 1 skipped a collective", "rank 2 passed mismatched sizes")


def test_an_even_split_with_no_history_blames_no_side(d):
    for r in range(4):
        write(d, r, [entry(0, count=1024 if r < 2 else 256, state="failed")])
    _check(d, "mismatch", [0, 1, 2, 3], 0, "ranks disagree at seq 0")


def test_a_rank_that_skipped_the_last_call_and_failed_in_torchs_barrier_is_no_crash(d):
    for r in (0, 1, 3):
        write(d, r, [*steps(11), stuck(11, fn="all_gather_into_tensor", count=1)])
    where = [["/venv/torch/distributed/distributed_c10d.py", 5356, "barrier"], ["/work/train.py", 90, "main"]]
    error = "RuntimeError: Connection closed by peer at distributed_c10d.py:5356 in barrier()"
    write(d, 2, steps(11), reason="exit", exit_error=error, exit_stack=where)
    _check(d, "skipped", [2], 11, "rank 2 skipped a collective", "barrier()")


def test_a_rank_that_skips_a_subgroup_call_while_the_others_wait_in_the_world(d):
    sub = [entry(k, count=64, t=T0 + 5 * k) for k in range(3)]  # a step: the subgroup's call, then four
    world = [entry(k, fn, n, t=T0 + 5 * (k // 4) + 1 + k % 4) for k, (fn, n) in zip(range(12), STEP * 3)]
    late = dict(error="CollectiveTimeout: x", what="receive from")
    write(d, 0, world, sub=[*sub, stuck(3, count=64, peer=1, t=T0 + 15, **late)])
    write(d, 1, [*world, stuck(12, peer=0, t=T0 + 16, **late)], sub=sub)
    for r in (2, 3):
        write(d, r, [*world, stuck(12, peer=0, t=T0 + 15, **late)])
    _check(d, "skipped", [1], 3, "rank 1 skipped a collective", "of group 1", "the call that comes next")


def test_a_mismatch_in_a_subgroup_is_named_not_the_world_collective_it_holds_up(d):
    sub = [entry(k, count=64) for k in range(3)]
    for r in (0, 1):
        bad = entry(3, count=65 if r else 64, state="failed", error="ValueError: ranks disagree")
        write(d, r, steps(12), sub=[*sub, bad], exit_error="ValueError: ranks disagree")
    for r in (2, 3):
        write(d, r, [*steps(12), stuck(12, peer=0)])
    diag = _check(d, "mismatch", [1], 3, "mismatched sizes", "rank 1 passed 65 float32")
    assert diag.group == "1"


def p2p(seq, fn, peer, count=512, state="completed", **kw):
    return dict(entry(seq, fn=fn, count=count, state=state, peer=peer, root=peer, **kw), kind="p2p")


def test_a_send_to_a_rank_that_never_receives(d):
    for r in (1, 2):
        write(d, r, [*steps(8), stuck(8, peer=0)])
    write(d, 3, [*steps(8), stuck(8, peer=0)])
    write(d, 0, steps(8), p2p=[p2p(0, "send", 3, count=16, state="failed", error="CollectiveTimeout: x")])
    _check(d, "unmatched", [0, 3], 0, "rank 0 waits in send to rank 3", "rank 3 waits in all_reduce seq 8")


def test_a_rank_that_skipped_a_collective_and_waits_in_a_receive_the_other_never_posts(d):
    exchange = [p2p(0, "recv", 0, t=T0 + 3.5), p2p(1, "send", 0, t=T0 + 3.6)]  # after each step's last call
    write(
        d,
        0,
        [*steps(7), stuck(7, fn="all_gather_into_tensor", count=1, peer=1)],
        p2p=[p2p(0, "send", 1, t=T0 + 3.5)],
    )
    write(
        d, 1, steps(7), p2p=[*exchange, p2p(2, "recv", 0, state="failed", t=T0 + 7.5, error="PeerError: x")]
    )
    for r in (2, 3):
        write(d, r, [*steps(7), stuck(7, fn="all_gather_into_tensor", count=1, peer=1)])
    _check(d, "skipped", [1], 7, "rank 1 skipped a collective", "all_gather_into_tensor seq 7")


def test_a_send_and_its_receive_of_different_sizes(d):
    for r in (2, 3):
        write(d, r, [*steps(8), stuck(8, peer=0)])
    write(d, 0, steps(8), p2p=[p2p(0, "send", 1, count=513, state="waiting")])
    write(d, 1, steps(8), p2p=[p2p(0, "recv", 0, state="failed", error="PeerError: x")])
    _check(d, "mismatch", [0, 1], 0, "rank 0 sends 513 float32 to rank 1", "rank 1 receives 512 float32")


@pytest.mark.parametrize("others", ["exit", "barrier"])
def test_a_rank_that_hangs_in_its_own_code_after_the_last_collective(d, others):
    barrier = [["/venv/torch/distributed/distributed_c10d.py", 10, "barrier"], ["/work/train.py", 95, "main"]]
    for r in (0, 1, 3):  # finished, or waiting for rank 2 in torch's barrier at the end
        write(d, r, steps(12), reason="exit" if others == "exit" else "SIGTERM", stack=barrier)
    write(
        d,
        2,
        steps(12),
        reason="SIGTERM",
        stack=[["/work/train.py", 28, "hang"], ["/work/train.py", 90, "main"]],
    )
    _check(
        d,
        "hang",
        [2],
        11,
        "rank 2 hangs in its own code at train.py:28 in hang()",
        "after its last collective",
    )


def test_a_rank_that_crashed_or_died_after_the_last_collective(d):
    for r in (0, 1):
        write(d, r, steps(12), reason="exit")
    write(d, 2, steps(12), reason="exit", exit_error="RuntimeError: boom at train.py:80 in save()")
    _check(d, "crashed", [2], 11, "rank 2 crashed after its last collective", "boom")
    write(d, 2, steps(12), reason="exit")
    _check(d, "died", [3], None, "rank 3 died")


def test_a_rank_stopped_before_its_first_collective_is_a_straggler_not_dead(d):
    for r in (0, 1, 3):
        write(d, r, [stuck(0, peer=2)])
    doc = dict(version=1, job="job1", rank=2, host="h", pid=1, reason="SIGTERM", time=T0 + 100)
    doc.update(exit_error=None, stack=[["/work/train.py", 28, "load_data"]], groups=[])
    (d / "rank2.json").write_text(json.dumps(doc))
    _check(d, "straggler", [2], 0, "train.py:28 in load_data()", "before")


def test_odd_dumps_never_crash_the_doctor_and_unreadable_files_are_named(d):
    for r in (0, 1, 3):
        write(d, r, [*steps(9), stuck(9)])
    whole = json.dumps(json.loads((d / "rank1.json").read_text()))
    (d / "rank2.json").write_text(whole[: len(whole) // 2])  # cut short while written
    diag = _check(d, "unreadable", [2], 9, "rank2.json could not be read")
    assert any("rank2.json" in n for n in diag.details)
    (d / "rank2.json").write_text(
        json.dumps(
            dict(
                rank=2,
                job="job1",
                groups=[dict(name="default", ranks=[0, 1, 2, 3], rank=2, entries=[{"seq": 0}, "junk"])],
            )
        )
    )
    assert doctor.diagnose(d).ranks == [2]  # fields missing from entries read as unknown
    for r in range(4):
        write(d, r, [])
    assert doctor.diagnose(d).kind == "ok" and "recorded no collectives" in doctor.diagnose(d).line
    (d / "rank0.json").write_text("[]")
    (d / "rank1.json").write_text("")
    diag = doctor.diagnose(d)
    assert diag.kind == "ok" and sum("could not read" in n for n in diag.details) == 2, diag.details
    assert doctor.table(d) == "" or isinstance(doctor.table(d), str)


def test_a_dead_rank_is_named_before_an_exchange_it_cut_short(d):
    # rank 2 died before step 3's all-reduces; torchrun then stopped the others: rank 0 in a send
    # to rank 1, which was still in its own code when it was stopped
    write(d, 0, steps(8), p2p=[p2p(2, "send", 1, state="posted", t=T0 + 7.5)], reason="SIGTERM")
    write(d, 1, steps(8), reason="SIGTERM", stack=[["/work/train.py", 50, "step"]])
    write(d, 3, [*steps(8), stuck(8, peer=2, error="PeerError: connection closed")])
    _check(d, "died", [2], 8, "rank 2 died")
