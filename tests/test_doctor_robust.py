"""The doctor on damaged and large records: one line, never a traceback, and time linear in entries.

Every field the red team broke (``seq``, ``t_posted``, ``ranks``, ``groups``,
``rank``) and more, in the package's files and in PyTorch's dumps; two runs
of one job id in one directory; 100,000 entries per rank.
"""

from __future__ import annotations

import copy
import json
import math
import pickle
import time

import pytest
from test_doctor import loop, stuck, write
from test_torchfr import fr_entry, fr_write, steps

from mycollectives import doctor
from mycollectives.doctor.__main__ import main

BAD_VALUES = ["5", 5.5, None, [1], {"a": 1}, True, -1, math.nan, "", 10**30]


def _mutations(doc: dict):
    """(what was changed, the damaged document) for each field of each place the red team named."""
    for v in BAD_VALUES:
        yield f"rank={v!r}", {**doc, "rank": v}
        yield f"groups={v!r}", {**doc, "groups": v}
        for field in ("ranks", "rank", "entries", "name"):
            x = copy.deepcopy(doc)
            x["groups"][0][field] = v
            yield f"group {field}={v!r}", x
        for field in ("seq", "t_posted", "t_done", "count", "peer", "root", "site", "state", "kind", "fn"):
            x = copy.deepcopy(doc)
            x["groups"][0]["entries"][-1][field] = v
            yield f"entry {field}={v!r}", x
        for field in ("stack", "exit_stack", "time", "exit_error", "job", "started", "run"):
            yield f"{field}={v!r}", {**doc, field: v}
    x = copy.deepcopy(doc)
    x["groups"][0]["ranks"] = [0, "1", 2, 3]
    yield "ranks with a string", x


@pytest.mark.timeout(120)
def test_no_damaged_package_record_makes_a_traceback(tmp_path, capsys):
    base = tmp_path / "base"
    for r in (0, 1, 3):
        write(base, r, [*loop(9), stuck(9)])
    write(base, 2, loop(9), reason="SIGTERM", stack=[["/work/train.py", 3, "f"]])
    doc = json.loads((base / "rank2.json").read_text())
    tried = 0
    for i, (what, bad) in enumerate(_mutations(doc)):
        d = tmp_path / f"m{i}"
        d.mkdir()
        for r in (0, 1, 3):
            (d / f"rank{r}.json").write_text((base / f"rank{r}.json").read_text())
        (d / "rank2.json").write_text(json.dumps(bad))
        doctor.diagnose(d)  # raises nothing (the command line's last resort is not what passes this)
        code = main([str(d)])
        out = capsys.readouterr()
        assert code in (0, 1, 2) and out.out.count("\n") >= 1, what
        if "could not read rank2.json" in out.err:
            assert "rank2.json" in out.err, what
        tried += 1
    assert tried > 200


FR_BAD = {
    "collective_seq_id": ["x", None, [1], 1.5],
    "input_sizes": ["x", [["a"]], [[None]], 5],
    "input_dtypes": [5, [None], "Float"],
    "process_group": [None, "0", ["0"], 7],
    "time_created_ns": ["x", None, -5, math.nan],
    "profiling_name": [None, 5, "nccl:send x->y", ""],
    "state": [None, 3, "odd"],
    "frames": ["x", [1], None],
}


@pytest.mark.timeout(120)
def test_no_damaged_pytorch_dump_makes_a_traceback(tmp_path, capsys):
    tried = 0
    for field, values in FR_BAD.items():
        for v in values:
            d = tmp_path / f"{field}-{tried}"
            for r in range(4):
                es = [*steps(6), fr_entry(7, state="started")]
                if r == 2:
                    es[-1][field] = v
                fr_write(d, r, es)
            doctor.diagnose(d)
            assert main([str(d)]) in (0, 1, 2), (field, v)
            capsys.readouterr()
            tried += 1
    for junk, name in [(b"\x80\x04junk", "a"), (pickle.dumps([1, 2]), "b"), (b"{", "c"), (b"", "d")]:
        d = tmp_path / f"junk-{name}"
        for r in range(3):
            fr_write(d, r, steps(6))
        (d / "nccl_trace_rank_3").write_bytes(junk)
        assert main([str(d)]) in (0, 1, 2)
        err = capsys.readouterr().err
        assert "could not read nccl_trace_rank_3" in err, err
    d = tmp_path / "evil"
    fr_write(d, 0, steps(3))
    (d / "nccl_trace_rank_1").write_bytes(pickle.dumps(print))  # a pickle that names a function
    assert main([str(d)]) in (0, 1, 2)
    assert "never does" in capsys.readouterr().err


def test_two_runs_of_one_job_id_the_faulty_one_first(tmp_path):
    """Four ranks, rank 2 stuck in its own code; then two healthy ranks with the same job id."""
    d = tmp_path / "f"
    for r in (0, 1, 3):
        write(d, r, [*loop(9), stuck(9)], run="world4-restart0", started=900.0)
    write(d, 2, loop(9), reason="SIGTERM", stack=[["/work/train.py", 3, "f"]], run="world4-restart0")
    assert doctor.diagnose(d).ranks == [2]
    for r in (0, 1):
        later = [dict(e, t_posted=e["t_posted"] + 500) for e in loop(6)]
        write(d, r, later, reason="exit", run="world2-restart0", started=T_LATER, world=2)
    diag = doctor.diagnose(d)
    assert diag.kind == "ok", diag.line
    assert any("ignored 1 older run" in n and "4 ranks, 2 file(s)" in n for n in diag.details), diag.details


T_LATER = 1_000_000.0 + 400


def _big(d, n: int) -> None:
    for r in range(4):
        es = [dict(e, seq=k, t_posted=1e6 + k * 1e-3) for k, e in enumerate(loop(3) * (n // 3))]
        write(d, r, es, reason="exit")


@pytest.mark.timeout(300)
def test_100k_entries_per_rank(tmp_path):
    """Linear in entries: 100,000 entries on each of four ranks (the time is printed, not asserted)."""
    _big(tmp_path / "a", 30_000)
    _big(tmp_path / "b", 99_999)
    times = []
    for sub in ("a", "b"):
        t = time.process_time()  # CPU time: the wall clock of a shared machine says little
        diag = doctor.diagnose(tmp_path / sub)
        times.append(time.process_time() - t)
        assert diag.kind == "ok", diag.line
    print(f"doctor: 4 x 30k entries {times[0]:.2f} s CPU, 4 x 100k entries {times[1]:.2f} s CPU")
