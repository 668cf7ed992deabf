"""The doctor on PyTorch's Flight Recorder dumps: NCCL-format fixtures written from the documented format.

Dumps as PyTorch writes them (``torch/distributed/flight_recorder``, c10d's
``FlightRecorder``): a dict with ``version``, ``pg_config``, ``pg_status``
and ``entries``, pickled (NCCL's watchdog, ``_dump_fr_trace()``) or JSON
(``_dump_fr_trace_json()``), one file per rank named with the rank at the end.
These cover what a CPU job cannot make: NCCL's states and point-to-point
entries, older versions' fields. ``tests/test_torchfr_jobs.py`` makes real
gloo dumps under torchrun.
"""

from __future__ import annotations

import json
import pickle

import pytest

from mycollectives import doctor

T0 = 1_700_000_000 * 10**9  # ns
LOOP = [("all_reduce", [[4096]]), ("all_reduce", [[1024]]), ("broadcast", [[512]])]


def fr_entry(seq, fn="all_reduce", sizes=((4096,),), state="completed", t_s=None, lib="nccl", **kw):
    """One entry as version 2.10 writes it (``seq_id`` instead of ``collective_seq_id`` when ``old``)."""
    t = T0 + int((seq if t_s is None else t_s) * 1e9)
    p2p = fn.startswith(("send", "recv"))
    e = dict(
        record_id=seq,
        pg_id=0,
        process_group=("0", "default_pg"),
        collective_seq_id=0 if p2p else seq,
        p2p_seq_id=seq if p2p else 0,
        op_id=seq,
        profiling_name=f"{lib}:{fn}",
        time_created_ns=t,
        input_sizes=[list(s) for s in sizes],
        input_dtypes=["Float"] * len(sizes),
        output_sizes=[list(s) for s in sizes],
        output_dtypes=["Float"] * len(sizes),
        state=state,
        time_discovered_started_ns=t + 1000 if state != "scheduled" else None,
        time_discovered_completed_ns=t + 2000 if state == "completed" else None,
        retired=state == "completed",
        timeout_ms=600_000,
        is_p2p=p2p,
        duration_ms=0.5 if state == "completed" else None,
        frames=[
            dict(name="all_reduce", filename="/x/torch/distributed/distributed_c10d.py", line=3245),
            dict(name="step", filename="/work/train.py", line=40),
        ],
    )
    e.update(kw)
    return e


def steps(n, **kw):
    """``n`` completed calls of the loop, seq 1 on (PyTorch numbers from 1)."""
    return [fr_entry(k + 1, fn, sizes, **kw) for k, (fn, sizes) in zip(range(n), LOOP * n)]


def fr_write(d, rank, entries, world=4, fmt="pickle", version="2.10", prefix="nccl_trace_rank_", **kw):
    """Rank ``rank``'s dump in ``d``."""
    d.mkdir(parents=True, exist_ok=True)
    colls = [e.get("collective_seq_id", e.get("seq_id")) for e in entries if not e.get("is_p2p")]
    colls = [k for k in colls if isinstance(k, int)]
    doc = dict(
        version=version,
        comm_lib_version="2.27.5",
        pg_config={"0": dict(name="0", desc="default_pg", ranks=str(list(range(world))))},
        pg_status={
            "0": dict(
                last_enqueued_collective=max(colls, default=-1),
                last_started_collective=max(colls, default=-1),
                last_completed_collective=max(
                    (k for k, e in zip(colls, entries) if e["state"] == "completed" and not e.get("is_p2p")),
                    default=-1,
                ),
            )
        },
        entries=entries,
    )
    doc.update(kw)
    if fmt == "json":
        for e in doc["entries"]:
            e.pop("frames", None)  # the JSON dump has no stacks
        (d / f"{prefix}{rank}").write_text(json.dumps(doc))
    else:
        (d / f"{prefix}{rank}").write_bytes(pickle.dumps(doc))


@pytest.fixture
def d(tmp_path):
    return tmp_path / "dumps"


def check(d, kind, ranks, seq, *words):
    diag = doctor.diagnose(d)
    assert (diag.kind, diag.ranks, diag.seq) == (kind, ranks, seq), diag.line
    for w in words:
        assert w in diag.line, diag.line
    return diag


@pytest.mark.parametrize("fmt", ["pickle", "json"])
def test_a_healthy_nccl_job_and_what_the_dumps_cannot_show(d, fmt):
    for r in range(4):
        fr_write(d, r, steps(9), fmt=fmt)
    check(d, "ok", [], None, "ranks 0-3 agree", "no roots or reduce ops")


def test_a_rank_queued_behind_earlier_work_never_started_the_collective(d):
    for r in range(4):
        last = fr_entry(10, state="scheduled" if r == 1 else "started")
        fr_write(d, r, [*steps(9), last])
    check(d, "straggler", [1], 10, "rank 1 never started seq 10", "state scheduled")


def test_a_rank_that_arrived_after_the_timeout_is_a_straggler(d):
    for r in range(4):
        t = 9 + (400 if r == 3 else 0)
        fr_write(d, r, [*steps(9), fr_entry(10, state="started", t_s=t)])
    check(d, "straggler", [3], 10, "rank 3 is a straggler", "400.0 s after")


def test_a_dead_rank_and_one_that_never_reached_the_call(d):
    for r in (0, 1, 3):
        fr_write(d, r, [*steps(9), fr_entry(10, state="started")])
    check(d, "died", [2], 10, "rank 2 died")
    fr_write(d, 2, steps(9))
    check(d, "straggler", [2], 10, "rank 2 never reached seq 10", "does not say where its main thread was")


def test_a_skipped_call_a_size_and_a_dtype_mismatch(d):
    for r in range(4):
        nxt = fr_entry(10, *LOOP[0], state="started")
        if r == 2:
            nxt = fr_entry(10, *LOOP[1], state="started")
        fr_write(d, r, [*steps(9), nxt])
    check(d, "skipped", [2], 10, "rank 2 skipped a collective")
    for r in range(4):
        nxt = fr_entry(10, sizes=((4097,),) if r == 2 else ((4096,),), state="started")
        fr_write(d, r, [*steps(9), nxt])
    check(d, "mismatch", [2], 10, "rank 2 passed 4097 float32")
    for r in range(4):
        nxt = fr_entry(10, state="started", input_dtypes=["BFloat16" if r == 0 else "Float"])
        fr_write(d, r, [*steps(9), nxt])
    check(d, "mismatch", [0], 10, "rank 0 passed 4096 bfloat16")


def test_a_broadcast_left_pending_names_what_the_dump_lacks(d):
    for r in range(4):
        fr_write(d, r, [*steps(9), fr_entry(10, *LOOP[0], state="started")])
    check(d, "stuck", [0, 1, 2, 3], 10, "record no roots or reduce ops")


def test_point_to_point_unmatched_and_mismatched(d):
    send = fr_entry(1, "send 0->1", state="started", t_s=20)
    fr_write(d, 0, [*steps(9), send], world=2)
    fr_write(d, 1, steps(9), world=2)
    check(d, "unmatched", [0, 1], 0, "rank 0 waits in send to rank 1")
    fr_write(d, 1, [*steps(9), fr_entry(1, "recv 1<-0", sizes=((8,),), state="started", t_s=20)], world=2)
    check(d, "mismatch", [0, 1], 0, "rank 0 sends 4096 float32 to rank 1", "rank 1 receives 8 float32")


def test_older_versions_fields(d):
    """Version 2.2 (PyTorch 2.5): ``seq_id`` beside ``collective_seq_id``, no dtypes, no pg_status."""
    for r in range(4):
        es = steps(9) + [fr_entry(10, sizes=((5,),) if r == 3 else ((4096,),), state="started")]
        for e in es:
            e.pop("input_dtypes")
            e.pop("is_p2p")
            e["seq_id"] = e.pop("collective_seq_id")
        fr_write(d, r, es, version="2.2")
    check(d, "mismatch", [3], 10, "rank 3 passed 5 None")


def test_named_subgroups_from_pg_config(d):
    cfg = {
        "0": dict(name="0", desc="default_pg", ranks="[0, 1, 2, 3]"),
        "1": dict(name="1", desc="tp", ranks="[0, 1]"),
    }
    for r in range(4):
        es = steps(6)
        if r < 2:
            sub = fr_entry(
                1, sizes=((9 if r == 1 else 8,),), state="started", t_s=7, process_group=("1", "tp")
            )
            es.append(sub)
        fr_write(d, r, es, pg_config=cfg)
    check(d, "mismatch", [0, 1], 1, "group tp")


def test_two_runs_of_one_job_id_in_one_folder_are_told_apart(d):
    """A faulty four-rank run, then a healthy two-rank run with the same id: the latest run is read."""
    for r in range(4):
        fr_write(d, r, steps(9) if r != 2 else steps(7))
    for r in range(2):
        fr_write(d, r, [fr_entry(k + 1, t_s=1000 + k) for k in range(5)], world=2)
    diag = check(d, "ok", [], None, "ranks 0, 1 agree")
    assert any("ignored 1 older run" in n and "4 ranks" in n for n in diag.details), diag.details


def test_the_command_line_prints_one_line_and_exits_1(d, capsys):
    from mycollectives.doctor.__main__ import main

    for r in (0, 1, 3):
        fr_write(d, r, [*steps(9), fr_entry(10, state="started")])
    assert main([str(d)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("rank 2 died") and out.count("\n") == 1, out


def test_ranks_stopped_after_a_broadcast_the_others_finished_name_the_missing_root(d):
    """Gloo marks a broadcast that failed as completed: two ranks stop after it, two go on."""
    for r in range(4):
        es = steps(9) + [fr_entry(10, *LOOP[2], lib="gloo")]
        if r in (1, 3):
            es.append(fr_entry(11, *LOOP[0], state="scheduled", lib="gloo"))
        fr_write(d, r, es)
    check(d, "straggler", [0, 2], 11, "ranks 0, 2 never reached seq 11", "broadcast from another root")


def test_a_rank_without_a_dump_where_gloo_counted_the_failed_call_as_completed(d):
    fr_write(d, 0, steps(12, lib="gloo"), world=2)
    check(d, "died", [1], 12, "rank 1 died: it left no Flight Recorder dump")


def test_a_gloo_run_dumped_as_its_last_barrier_returned_blames_no_one(d):
    for r in range(4):
        fr_write(d, r, [*steps(9, lib="gloo"), fr_entry(10, "barrier", (), state="scheduled", lib="gloo")])
    check(d, "ok", [], 10, "no fault found in the calls", "had not completed")


def test_a_straggler_in_a_gloo_run_dumped_as_its_last_barrier_returned_is_still_named(d):
    """The barrier left pending at the dump blames no one, and must not hide what the timestamps show."""
    for r in range(4):
        late = 0.1 if r == 2 else 0.0
        done = [
            fr_entry(k + 1, fn, sizes, lib="gloo", t_s=k + 1 + late) for k, (fn, sizes) in enumerate(LOOP * 3)
        ]
        fr_write(d, r, [*done, fr_entry(10, "barrier", (), state="scheduled", lib="gloo")])
    check(d, "straggler", [2], 9, "rank 2 is a straggler")
