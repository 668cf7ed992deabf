"""Chapter 6's exercise checks: right answers pass, wrong ones fail with a message saying why.

The expected values are recomputed here independently (the busbw decoder by
hand, NVLS's traffic from the simulator's link bytes, the bucket size from
the closed form), so a check that computed the wrong thing would fail too.
"""

from __future__ import annotations

import pytest

from mycollectives import doctor
from mycollectives.book.exercises import debugging as ex
from mycollectives.sim import simulate
from mycollectives.topology import dgx_h100

Q = ex.QUESTIONS


def test_busbw_decoder():
    q = Q["decode"]
    algbw = q["size"] / (q["time_us"] * 1e-6) / 1e9
    ex.check_busbw(algbw * 2 * (q["ranks"] - 1) / q["ranks"])
    with pytest.raises(AssertionError, match="that is the algbw"):
        ex.check_busbw(algbw)  # algbw is not busbw
    with pytest.raises(AssertionError, match="not 2"):
        ex.check_busbw(algbw * 2)
    with pytest.raises(AssertionError, match="too high; algbw"):
        ex.check_busbw(algbw * 3)


@pytest.mark.parametrize(
    "check",
    [
        ex.check_busbw,
        ex.check_nvls_link_rate,
        ex.check_per_nic,
        ex.check_alltoall_busbw,
        ex.check_bucket_size,
        ex.check_diagnosis,
    ],
)
def test_a_placeholder_answer_reveals_nothing(check, capsys):
    check(None)
    out = capsys.readouterr().out
    assert out.startswith("not answered yet") and out.count("\n") == 1 and "Correct" not in out, out


def test_nvls_link_rate_agrees_with_the_simulators_link_bytes():
    n, size = Q["nvls"]["ranks"], 1 << 30
    res = simulate("all_reduce", "nvls", size, dgx_h100(nvls=True))
    up = res.link_bytes.max()  # the busiest link: one GPU's link to its switch, one way
    per_byte = up / size  # bytes each way on a GPU's NVLink per byte of the vector
    assert per_byte == pytest.approx((n + 1) / n, rel=1e-3)
    algbw = Q["nvls"]["busbw"] / (2 * (n - 1) / n)
    ex.check_nvls_link_rate(algbw * per_byte)
    with pytest.raises(AssertionError, match="busbw itself"):
        ex.check_nvls_link_rate(Q["nvls"]["busbw"])  # the busbw is not what the wire carries


def test_per_nic_and_alltoall():
    q = Q["per_nic"]
    ex.check_per_nic(q["busbw"] / q["nics_per_node"])
    with pytest.raises(AssertionError, match="split over the node's NICs"):
        ex.check_per_nic(q["busbw"])
    q = Q["alltoall"]
    n = q["nodes"] * q["gpus_per_node"]
    ex.check_alltoall_busbw(q["nic"] * q["nodes"] / (q["nodes"] - 1) * (n - 1) / n)
    with pytest.raises(AssertionError, match="NIC's rate"):
        ex.check_alltoall_busbw(q["nic"])


def test_bucket_size_is_the_smallest_that_meets_the_target():
    q = Q["bucket"]
    p = q["ranks"]
    a, b = 2 * (p - 1) * q["alpha"], 2 * (p - 1) / p / q["bandwidth"]  # ring: latency and per-byte time
    best = (1 - q["overhead"]) / q["overhead"] * a / b / (1 << 20)  # latency share a / (a + s b) = overhead
    ex.check_bucket_size(best * 1.02)
    with pytest.raises(AssertionError, match="too small"):
        ex.check_bucket_size(best * 0.8)
    with pytest.raises(AssertionError, match="smaller bucket"):
        ex.check_bucket_size(25.0)  # DDP's default: latency is a small share, but far from the smallest


def test_the_mystery_records_and_their_diagnosis(tmp_path):
    d = ex.mystery(tmp_path)
    diag = doctor.diagnose(d)
    assert (diag.kind, diag.ranks, diag.seq) == ("skipped", [3], 7), diag.line
    ex.check_diagnosis({"rank": 3, "seq": 7, "kind": "skipped"})
    with pytest.raises(AssertionError, match="the odd rank is the one whose call differs"):
        ex.check_diagnosis({"rank": 2, "seq": 7, "kind": "skipped"})
    with pytest.raises(AssertionError, match="what the loop calls next"):
        ex.check_diagnosis({"rank": 3, "seq": 7, "kind": "order"})
    with pytest.raises(AssertionError, match="dict"):
        ex.check_diagnosis("rank 3")
