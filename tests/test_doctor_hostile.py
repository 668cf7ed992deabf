"""The doctor never names a rank as died when its dump is there or it returned normally, and says
"unknown" rather than guess from odd fields (issue 42, finding 7)."""

from __future__ import annotations

import torch
from test_torchfr import fr_write, steps

import mycollectives as mc
from mycollectives import doctor, virtual


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
