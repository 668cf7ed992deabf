"""Chapter 2's design problems: DDP against FSDP, and tensor-parallel decoding."""

from __future__ import annotations

import pytest

from mycollectives.book.exercises.primitives import LINKS
from mycollectives.book.exercises.training import (
    check_dp_design,
    check_tp_decode,
    data_parallel_bytes,
    tp_decode_times,
)

N = 2 * 7e9  # bf16 bytes of a 7-billion-parameter model


def test_data_parallel_bytes_from_the_records():
    got = data_parallel_bytes(7e9, 8)
    assert got["ddp"] == pytest.approx(1.75 * N) and got["fsdp"] == pytest.approx(3 * 0.875 * N)


def test_dp_design_right(capsys):
    check_dp_design("fsdp", 1.75 * N, 2.625 * N)
    out = capsys.readouterr().out
    assert "FSDP" in out and "1.5x" in out


@pytest.mark.parametrize(
    "answer,says",
    [
        (("fsdp", 2 * N, 2.625 * N), "2n counts"),
        (("fsdp", 1.75 * N, 1.75 * N), "gathers them again"),
        (("fsdp", 3.5 * N, 2.625 * N), "2 bytes each, not 4"),
        (("ddp", 1.75 * N, 2.625 * N), "whole training state"),
    ],
)
def test_dp_design_wrong(answer, says, capsys):
    with pytest.raises(AssertionError, match=says):
        check_dp_design(*answer)
    assert capsys.readouterr().out == ""


def test_tp_decode_right(capsys):
    one, token, bound = tp_decode_times()
    assert bound == "latency" and token == pytest.approx(160 * one)
    check_tp_decode(one, token, "latency")
    assert capsys.readouterr().out.count("Correct") == 3


def test_tp_decode_wrong(capsys):
    lk = LINKS["nvlink4"]
    one, token, _ = tp_decode_times()
    n = 8 * 8192 * 2
    with pytest.raises(AssertionError, match="once per call"):
        check_tp_decode(14 * (lk.alpha + n / 8 * lk.beta), token, "latency")
    with pytest.raises(AssertionError, match="n/p bytes"):
        check_tp_decode(lk.collective_time(14, n), token, "latency")
    with pytest.raises(AssertionError, match="twice"):
        check_tp_decode(one, token / 2, "latency")
    with pytest.raises(AssertionError, match="latency-bound"):
        check_tp_decode(one, token, "bandwidth")
    assert capsys.readouterr().out == ""
