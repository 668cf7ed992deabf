"""The flight recorder on local worlds: what it keeps, when it writes, what the error says.

Failures here are real ones (a rank that never joins, ranks that disagree,
two ranks that both receive first); the records they leave are then read by
the doctor, which must name the rank and the sequence number.
"""

from __future__ import annotations

import json

import pytest
import torch

import mycollectives as mc
from mycollectives import doctor, flight
from mycollectives.doctor.__main__ import main as doctor_main
from mycollectives.flight.files import flight_dir
from mycollectives.transport import LocalWorld, current_local


@pytest.fixture
def dumps(tmp_path, monkeypatch):
    d = tmp_path / "flight"
    monkeypatch.setenv("MYCOLLECTIVES_FLIGHT_DIR", str(d))
    return d


def _records(world_size: int, fn, timeout: float = 2.0, eager_bytes=None):
    """Run ``fn(rank)`` on a local world; each rank returns its result and its record."""
    world = LocalWorld(world_size, timeout=timeout, eager_bytes=eager_bytes)

    def body(rank):
        try:
            out = fn(rank)
        except (mc.CollectiveError, ValueError) as e:
            out = e
        return out, flight.snapshot(current_local())

    return world.run(body)


def test_every_call_is_kept_in_order_with_its_sizes_algorithm_state_and_call_site():
    def fn(rank):
        mc.all_reduce(torch.ones(10), algorithm="ring")
        mc.broadcast(torch.ones(3, dtype=torch.int64), src=1)
        w = mc.all_gather_into_tensor(torch.empty(8), torch.ones(2), async_op=True)
        w.wait()
        mc.barrier()

    for out, rec in _records(4, fn):
        assert out is None
        assert [e["seq"] for e in rec] == [0, 1, 2, 3]
        assert [e["fn"] for e in rec] == ["all_reduce", "broadcast", "all_gather_into_tensor", "barrier"]
        assert [(e["count"], e["dtype"]) for e in rec[:3]] == [(10, "float32"), (3, "int64"), (2, "float32")]
        assert rec[0]["algorithm"] == "ring" and rec[1]["root"] == 1
        assert all(e["state"] == "completed" and e["phase"] == "schedule" for e in rec)
        assert all(e["t_posted"] <= e["t_started"] <= e["t_done"] for e in rec)
        assert rec[0]["site"].endswith(f"test_flight.py:{fn.__code__.co_firstlineno + 1}"), rec[0]["site"]
        assert rec[0]["function"] == "fn"


def test_the_ring_keeps_the_last_n_and_size_zero_turns_it_off():
    old = flight.set_size(3)
    try:

        def fn(rank):
            for _ in range(5):
                mc.all_reduce(torch.ones(2))

        for _, rec in _records(2, fn):
            assert [e["seq"] for e in rec] == [2, 3, 4]
        flight.set_size(0)
        for _, rec in _records(2, fn):
            assert rec == []
    finally:
        flight.set_size(old)
    with pytest.raises(ValueError, match="size"):
        flight.set_size(-1)


def test_a_rank_that_never_joins_leaves_the_others_waiting_on_it_and_a_dump_the_doctor_reads(dumps):
    def fn(rank):
        for _ in range(3):
            mc.all_reduce(torch.ones(6))
        if rank != 2:
            mc.all_reduce(torch.ones(6))

    results = _records(4, fn)
    for rank, (out, rec) in enumerate(results):
        if rank == 2:
            assert out is None and len(rec) == 3
            continue
        assert isinstance(out, mc.CollectiveError)
        assert f"flight record: {dumps}" in str(out) and f"mycollectives.doctor {dumps}" in str(out)
        last = rec[-1]
        assert last["seq"] == 3 and last["state"] == "failed" and last["phase"] == "argument check"
        assert last["peer"] is not None and last["what"] == "receive from" and last["round"] >= 0
    files = sorted(p.name for p in dumps.glob("rank*.json"))
    assert files == ["rank0.json", "rank1.json", "rank2.json", "rank3.json"]
    doc = json.loads((dumps / "rank0.json").read_text())
    assert doc["groups"][0]["failure"]["seq"] == 3 and doc["groups"][0]["name"] == "local world"
    diag = doctor.diagnose(dumps)
    assert diag.ranks == [2] and diag.seq == 3 and diag.kind == "skipped", diag.line


@pytest.mark.parametrize(
    "bad, kind, words",
    [
        (lambda r: torch.ones(7 if r == 1 else 6), "mismatch", "mismatched sizes at seq 2"),
        (lambda r: torch.ones(6, dtype=torch.float64 if r == 1 else torch.float32), "mismatch", "dtypes"),
    ],
)
def test_ranks_that_disagree_are_named_by_rank_and_sequence_number(dumps, bad, kind, words):
    def fn(rank):
        mc.all_reduce(torch.ones(6))
        mc.all_reduce(torch.ones(6))
        mc.all_reduce(bad(rank))

    for out, _ in _records(3, fn):
        assert isinstance(out, ValueError) and "ranks disagree" in str(out), out
    diag = doctor.diagnose(dumps)
    assert (diag.kind, diag.ranks, diag.seq) == (kind, [1], 2), diag.line
    assert words in diag.line and "rank 1" in diag.line


def test_disagreement_raises_value_error_naming_the_dump(dumps):
    def fn(rank):
        with pytest.raises(ValueError, match="ranks disagree") as info:
            mc.all_reduce(torch.ones(3 + rank))
        return str(info.value)

    world = LocalWorld(2, timeout=2.0)
    for msg in world.run(fn):
        assert f"mycollectives.doctor {dumps}" in msg


def test_two_ranks_that_both_receive_first_are_a_point_to_point_deadlock(dumps):
    def fn(rank):
        mc.all_reduce(torch.ones(4))
        x = torch.zeros(64)
        mc.recv(x, src=1 - rank)
        mc.send(x, dst=1 - rank)

    results = _records(2, fn)
    for out, rec in results:
        assert isinstance(out, mc.DeadlockError)
        assert rec[-1]["kind"] == "p2p" and rec[-1]["fn"] == "recv" and rec[-1]["state"] == "failed"
    diag = doctor.diagnose(dumps)
    assert diag.kind == "deadlock" and diag.ranks == [0, 1], diag.line
    assert "rank 0 waits in recv from rank 1" in diag.line and "rank 1 waits in recv from rank 0" in diag.line


def test_dump_on_demand_and_the_cli(dumps, capsys):
    world = LocalWorld(2, timeout=2.0)

    def fn(rank):
        mc.all_reduce(torch.ones(4))
        return flight.dump()

    where = world.run(fn)
    assert where[0] == dumps and (dumps / "rank1.json").exists()
    assert doctor_main([str(dumps)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("no fault found") and len(out) == 1
    assert doctor_main([str(dumps / "nowhere")]) == 2


def test_without_the_variable_the_default_directory_is_named_in_the_error(monkeypatch):
    monkeypatch.delenv("MYCOLLECTIVES_FLIGHT_DIR", raising=False)
    default = flight_dir("local-1-2")
    assert default.name == "local" and default.parent.name == "mycollectives-flight"

    def fn(rank):
        if rank == 0:
            mc.all_reduce(torch.ones(2))

    out, _ = _records(2, fn)[0]
    assert f"mycollectives.doctor {default}" in str(out), str(out)
