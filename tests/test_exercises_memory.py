"""The introduction's and chapter 1's exercise checks: the right answer passes,
typical wrong ones fail with a message that says what was left out, and a
check of several parts prints nothing before every part has passed."""

from __future__ import annotations

import math

import pytest

from mycollectives.book.exercises.memory import (
    check_activation_bytes,
    check_decode_design,
    check_gpus_for_state,
    check_largest_model,
    check_occupancy,
    check_roofline,
    check_shard_design,
    decode_batch,
    fewest_shards,
    gemm_intensity,
    kv_sequences,
    warps_resident,
)
from mycollectives.memory import A100, H100, EncoderConfig, activation_bytes
from tests.unanswered import assert_not_answered


def test_gpus_for_state(capsys):
    check_gpus_for_state(35, params=175e9)
    assert "Correct: 35" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="fewest"):
        check_gpus_for_state(34, params=175e9)
    assert_not_answered(check_gpus_for_state, None)


def test_occupancy_counts_whole_blocks(capsys):
    assert warps_resident(80) == 25 and warps_resident(80, 256) == 24
    check_occupancy(24 / 64)
    assert "Correct" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong,says",
    [
        (25 / 64, "whole blocks"),  # whole warps, but not whole blocks
        (65536 / (80 * 32) / 64, "round down"),  # a fraction of a block
        (24, "fraction of the SM's 64 warp slots"),
        (0.3, "count the registers per SM"),  # anything else: the method
    ],
)
def test_occupancy_says_what_is_likely_wrong(wrong, says):
    with pytest.raises(AssertionError, match=says):
        check_occupancy(wrong)


def test_roofline_right(capsys):
    check_roofline(494.7e12 / 3.35e12, gemm_intensity(48, 5120))
    out = capsys.readouterr().out
    assert out.count("Correct") == 2 and all(len(line) <= 78 for line in out.splitlines())


def test_intensity_without_activations_fails_and_says_so(capsys):
    ridge = H100.ridge_point("tf32")
    assert abs(48 / gemm_intensity(48, 5120) - 1) < 0.02  # the old 2 % tolerance let this pass
    with pytest.raises(AssertionError, match="weight's bytes only"):
        check_roofline(ridge, 48.0)
    with pytest.raises(AssertionError, match="2 bytes, not 4, and a multiply-add is 2 FLOPs"):
        check_roofline(ridge, gemm_intensity(48, 5120, itemsize=4))
    with pytest.raises(AssertionError, match="one activation"):
        check_roofline(ridge, 2 * 48 * 5120**2 / (2 * (5120**2 + 48 * 5120)))
    assert capsys.readouterr().out == ""  # the ridge point was right, but nothing is printed


def test_roofline_wrong_ridge_point():
    with pytest.raises(AssertionError, match="TF32 ridge point"):
        check_roofline(H100.ridge_point("bf16"), gemm_intensity(48, 5120))


def test_activation_bytes():
    cfg = EncoderConfig(batch=8, seq=256)
    check_activation_bytes(activation_bytes(cfg, 4), cfg)
    with pytest.raises(AssertionError, match="off by"):
        check_activation_bytes(activation_bytes(cfg, 2), cfg)


def test_shard_design(capsys):
    assert fewest_shards(20e9, 16e9, 80e9) == 5
    check_shard_design(5)
    assert "Correct: 5 GPUs" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="activations need room"):
        check_shard_design(4)  # the state alone fills four GPUs
    with pytest.raises(AssertionError, match="fewer"):
        check_shard_design(8)
    assert_not_answered(check_shard_design, None)


def test_decode_design(capsys):
    assert decode_batch(A100, 5120) == 256  # 5120 b / (5120 + 2 b): 122 at 128, 233 at 256; ridge 153
    assert kv_sequences(A100.hbm_bytes, 26e9, 40, 5120, 4096) == 16  # 54 GB / 3.36 GB
    check_decode_design(256, 16)
    assert "memory-bound" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="below it"):
        check_decode_design(128, 16)
    with pytest.raises(AssertionError, match="but so is batch 256"):
        check_decode_design(512, 16)
    with pytest.raises(AssertionError, match="3.36 GB"):
        check_decode_design(256, 17)  # 54 GiB instead of 54 GB
    with pytest.raises(AssertionError):
        check_decode_design(256, 29)  # the chapter's worked example (32 layers of 4096) is not this model
    assert capsys.readouterr().out == ""


def test_largest_model():
    check_largest_model(80e9 / 16)
    with pytest.raises(AssertionError, match="off by"):
        check_largest_model(80e9 / 12)
    assert math.isclose(gemm_intensity(1, 4096), 4096 / 4098)
