"""Compute as measured GPUs run it: achieved rates by default, the roofline on request, reductions
inside collectives charged, and bad efficiencies refused before anything runs."""

from __future__ import annotations

import pytest
import torch

import mycollectives as mc
from mycollectives import virtual
from mycollectives.virtual import rates

T = 120  # wall-clock guard of every run, seconds
H100_PEAK = virtual.GPU_ROOFLINES["H100 SXM5"].peak_flops


def _flops(rank, flops):
    return virtual.compute(flops=flops)


def test_a_peak_second_of_flops_takes_longer_than_a_second_by_default():
    achieved = virtual.run(_flops, "dgx_h100", 1, (H100_PEAK,), world_size=1, timeout=T).results[0]
    bound = virtual.run(_flops, "dgx_h100", 1, (H100_PEAK,), world_size=1, timeout=T, compute="roofline")
    assert bound.results[0] == pytest.approx(1.0)
    assert achieved == pytest.approx(1 / rates.GEMM_EFFICIENCY["H100 SXM5"])  # 80.3 % of peak: 1.245 s


def test_a_gemm_pays_for_whole_tiles_and_waves():
    full = rates.quantisation((1, 128 * 132, 128, 64), 132)  # one full wave of whole tiles
    ragged = rates.quantisation((1, 128 * 132 + 1, 128, 64), 132)  # one row more: a second wave, nearly idle
    small = rates.quantisation((1, 16, 256, 256), 132)  # under one wave: not charged by tiles
    assert full == pytest.approx(1.0) and ragged == pytest.approx(2.0, rel=0.01) and small == 1.0
    assert rates.gemm_shape("aten::addmm", (torch.ones(3), torch.ones(5, 7), torch.ones(7, 3))) == (
        1,
        5,
        3,
        7,
    )
    assert rates.gemm_shape("aten::add", (torch.ones(3), torch.ones(3))) is None


def _matmul(rank, dtype):
    a, b = torch.ones(1024, 1024, dtype=dtype), torch.ones(1024, 1024, dtype=dtype)  # compute-bound
    t0 = virtual.clock()
    a @ b
    return virtual.clock() - t0


def test_float32_matmuls_follow_torchs_matmul_precision():
    before = torch.get_float32_matmul_precision()
    big = virtual.Rates(floor=0.0)  # the roofline without its floor, so small GEMMs show their rate
    try:
        torch.set_float32_matmul_precision("highest")
        fp32 = virtual.run(_matmul, "dgx_h100", 1, (torch.float32,), world_size=1, timeout=T, compute=big)
        torch.set_float32_matmul_precision("high")
        tf32 = virtual.run(_matmul, "dgx_h100", 1, (torch.float32,), world_size=1, timeout=T, compute=big)
    finally:
        torch.set_float32_matmul_precision(before)
    bf16 = virtual.run(_matmul, "dgx_h100", 1, (torch.bfloat16,), world_size=1, timeout=T, compute=big)
    assert tf32.results[0] == pytest.approx(2 * bf16.results[0])  # TF32 runs at half the bf16 peak
    assert fp32.results[0] > 5 * tf32.results[0]  # the FP32 rate, 67 of 989 TFLOP/s


@pytest.mark.parametrize("async_op", [False, True])
def test_the_reductions_inside_a_collective_are_charged(async_op):
    def call(rank):
        x = torch.ones(1 << 20)
        t0 = virtual.clock()
        work = mc.all_reduce(x, algorithm="ring", async_op=async_op)
        if work is not None:
            work.wait()
        return virtual.clock() - t0

    free = max(virtual.run(call, "dgx_h100", 1, timeout=T, compute=virtual.NETWORK_ONLY).results)
    charged = max(virtual.run(call, "dgx_h100", 1, timeout=T, compute="roofline").results)
    # a ring of 8 reduces 7 blocks of 512 KiB on every rank, reading two and writing one at HBM speed
    block = (1 << 20) * 4 / 8
    assert charged - free == pytest.approx(
        7 * 3 * block / virtual.GPU_ROOFLINES["H100 SXM5"].bandwidth, rel=0.05
    )


@pytest.mark.parametrize(
    "bad, name",
    [(dict(gemm=0.0), "gemm"), (dict(gemm=1.5), "gemm"), (dict(hbm=-0.1), "hbm"), (dict(hbm=True), "hbm")],
)
def test_an_efficiency_outside_0_to_1_is_refused_naming_it(bad, name):
    with pytest.raises(ValueError, match=rf"^{name}: expected an efficiency in \(0, 1\]"):
        virtual.Rates(**bad)


def test_an_unknown_compute_mode_is_refused_before_anything_runs():
    ran = []
    with pytest.raises(ValueError, match="compute: expected one of"):
        virtual.run(lambda rank: ran.append(rank), "dgx_h100", 1, compute="fast", timeout=T)
    assert not ran
