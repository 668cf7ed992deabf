"""Check functions for the exercises of the introduction, chapter 1 and lab 1.

Each ``check_*`` raises ``AssertionError`` with a message that says what is
wrong, or prints what was right. The expected values are computed here, from
the same package the chapters use, so a notebook cell shows the question and
not the answer.
"""

from __future__ import annotations

import math

from .ledger import EncoderConfig, activation_bytes
from .vendor import A100, H100


def _need(answer: object, what: str) -> None:
    assert answer is not None, f"replace None with your answer: {what}"


def _close(answer: float, want: float, what: str, rel: float = 0.02) -> None:
    _need(answer, what)
    assert math.isclose(float(answer), want, rel_tol=rel), (
        f"{what}: got {answer:.4g}, which is off by {100 * (float(answer) / want - 1):+.0f}% from the expected value"
    )
    print(f"Correct: {what} = {float(answer):.4g}")


def check_gpus_for_state(answer: int | None, params: float = 70e9) -> None:
    """Intro: fewest 80 GB GPUs that hold 16 bytes per parameter (no activations)."""
    _need(answer, "number of GPUs")
    want = math.ceil(params * 16 / H100.hbm_bytes)
    need = params * 16 / 1e9
    assert answer == want, (
        f"{answer} GPUs of 80 GB hold {answer * 80} GB; the state needs {need:.0f} GB: find the fewest"
    )
    print(f"Correct: {want} GPUs")


def check_occupancy(answer: float | None, registers_per_thread: int = 80) -> None:
    """Chapter 1: A100 occupancy (fraction) at ``registers_per_thread``, warp granularity."""
    regs = A100.registers_per_sm_bytes // 4
    warps = min(64, regs // (registers_per_thread * 32))
    _close(answer, warps / 64, f"occupancy at {registers_per_thread} registers per thread")


def check_ridge_point(answer: float | None) -> None:
    """Chapter 1: H100 bf16 ridge point in FLOPs per byte."""
    _close(answer, H100.ridge_point("bf16"), "H100 bf16 ridge point (FLOPs/byte)")


def check_decode_intensity(answer: float | None, batch: int = 8, d: int = 4096) -> None:
    """Chapter 1: intensity of a bf16 ``(batch, d) @ (d, d)`` GEMM."""
    want = 2 * batch * d * d / (2 * (batch * d + d * d + batch * d))
    _close(answer, want, f"arithmetic intensity at batch {batch}")


def check_activation_bytes(answer: float | None, cfg: EncoderConfig) -> None:
    """Chapter 1: activation bytes of ``cfg`` in fp32 without checkpointing."""
    _close(answer, activation_bytes(cfg, 4), "activation bytes", rel=0.01)


def check_largest_model(answer: float | None, hbm_bytes: float = 80e9) -> None:
    """Lab 1: parameters whose mixed-precision training state fills ``hbm_bytes``."""
    _close(answer, hbm_bytes / 16, "parameters that fit")


__all__ = [
    "check_activation_bytes",
    "check_decode_intensity",
    "check_gpus_for_state",
    "check_largest_model",
    "check_occupancy",
    "check_ridge_point",
]
