"""Check functions for the introduction, chapter 1 ("The memory hierarchy") and lab 1.

The expected values are computed here from the vendor figures
(:mod:`mycollectives.memory.vendor`) and the ledger
(:mod:`mycollectives.memory.ledger`), so that a notebook shows the question
and not the answer. Typical mistakes get their own message: occupancy that
counts a fraction of a warp, a GEMM's intensity without its activations, a
sharded training state without room for the activations.
"""

from __future__ import annotations

import math

from ...memory.ledger import EncoderConfig, activation_bytes
from ...memory.vendor import A100, H100, GPUSpec
from .answers import exercise, expect, near, need, number, passed


@exercise
def check_gpus_for_state(answer: int | None, params: float = 70e9, hbm_bytes: float = H100.hbm_bytes) -> None:
    """Intro: fewest GPUs of ``hbm_bytes`` that hold 16 bytes per parameter (no activations)."""
    need(answer, "number of GPUs")
    need_gb, per_gpu = params * 16 / 1e9, hbm_bytes / 1e9
    want = math.ceil(params * 16 / hbm_bytes)
    assert answer == want, (
        f"{answer} GPUs of {per_gpu:.0f} GB hold {answer * per_gpu:.0f} GB; the state needs "
        f"{need_gb:.0f} GB (16 bytes per parameter): find the fewest GPUs that hold it, rounding up"
    )
    passed(f"Correct: {want} GPUs")


def warps_resident(registers_per_thread: int, block_threads: int = 32, spec: GPUSpec = A100) -> int:
    """Warps one SM keeps resident, counting registers only: whole blocks of
    ``block_threads`` threads, at most 64 warps (2048 threads)."""
    registers = spec.registers_per_sm_bytes // 4  # 32-bit registers
    blocks = registers // (registers_per_thread * block_threads)
    return min(64, blocks * block_threads // 32)


@exercise
def check_occupancy(answer: float | None, registers_per_thread: int = 80, block_threads: int = 256) -> None:
    """Chapter 1: A100 occupancy (a fraction of 64 warp slots) of a kernel of
    ``block_threads``-thread blocks at ``registers_per_thread``, counting registers only."""
    what = f"occupancy at {registers_per_thread} registers per thread, blocks of {block_threads}"
    got = number(answer, what)
    regs = A100.registers_per_sm_bytes // 4
    warps = warps_resident(registers_per_thread, block_threads)
    want = warps / 64
    if near(got, want, 1e-6):
        passed(f"Correct: {got:.4g}, {warps} of 64 warps ({warps * 32 // block_threads} blocks)")
        return
    per_block = registers_per_thread * block_threads
    hints = {
        warps_resident(registers_per_thread) / 64: (
            f"that counts whole warps, but an SM holds whole blocks: {regs:,} registers fit "
            f"{regs // per_block} blocks of {per_block:,}"
        ),
        regs / (registers_per_thread * 32) / 64: (
            f"{regs:,} registers hold {regs / per_block:.2f} blocks' worth, but a block is resident whole "
            f"or not at all: round down before counting warps"
        ),
        min(1.0, regs / registers_per_thread / 64): (
            "that divides the registers among warps as if a warp were one thread: "
            f"a warp of 32 threads needs {registers_per_thread} x 32 registers"
        ),
        float(warps): f"{warps} is the number of warps: occupancy is the fraction of the SM's 64 warp slots",
        min(1.0, A100.registers_per_sm_bytes // per_block * block_threads / 32 / 64): (
            f"the register file is {A100.registers_per_sm_bytes // 1024} KB of 4-byte registers, "
            f"{regs:,} of them, not {A100.registers_per_sm_bytes:,}"
        ),
    }
    for wrong, hint in hints.items():
        if near(got, wrong, 1e-3) and not near(wrong, want, 1e-6):
            raise AssertionError(f"{what}: got {got:.4g}; {hint}")
    raise AssertionError(
        f"{what}: got {got:.4g}; count the registers per SM ({regs:,}), the blocks of "
        f"{registers_per_thread} x {block_threads} registers they hold (whole blocks), their warps, "
        "and divide by 64"
    )


def gemm_intensity(batch: int, d: int, itemsize: int = 2) -> float:
    """FLOPs per byte of a ``(batch, d) @ (d, d)`` GEMM that reads the weight
    and the input and writes the output once each."""
    return 2 * batch * d * d / (itemsize * (d * d + 2 * batch * d))


def _intensity_line(answer: object, batch: int, d: int) -> str:
    what = f"arithmetic intensity of a bf16 ({batch}, {d}) @ ({d}, {d}) GEMM"
    got = number(answer, what)
    want = gemm_intensity(batch, d)
    mistakes = {
        batch: "that counts the weight's bytes only: the GEMM also reads its (b, d) input and writes its "
        f"(b, d) output, 2 x {batch} x {d} more elements",
        2 * batch * d * d / (2 * (d * d + batch * d)): "that leaves out one activation: the input is read "
        "and the output written, both (b, d)",
        gemm_intensity(batch, d) / 2: "half the intensity: bf16 elements are 2 bytes, not 4, and a "
        "multiply-add is 2 FLOPs (a (b, d) @ (d, d) GEMM does 2 b d^2)",
    }
    for wrong, hint in mistakes.items():
        if near(got, wrong, 5e-4) and not near(wrong, want, 5e-4):
            raise AssertionError(f"{what}: got {got:.4g}; {hint}")
    return expect(got, want, what, rel=5e-4, hint="FLOPs 2 b d^2 over the bytes of weight, input and output")


@exercise
def check_roofline(ridge: float | None, intensity: float | None, batch: int = 48, d: int = 5120) -> None:
    """Chapter 1: the H100's TF32 ridge point, and the intensity of a bf16 ``(batch, d) @ (d, d)`` GEMM."""
    lines = [
        expect(
            ridge,
            H100.ridge_point("tf32"),
            "H100 TF32 ridge point (FLOPs/byte)",
            hint="peak TF32 tensor-core FLOP/s over HBM bytes/s",
        ),
        _intensity_line(intensity, batch, d),
    ]
    passed(*lines)


@exercise
def check_activation_bytes(answer: float | None, cfg: EncoderConfig) -> None:
    """Chapter 1: activation bytes of ``cfg`` in fp32 without checkpointing."""
    passed(expect(answer, activation_bytes(cfg, 4), "activation bytes", rel=0.01))


def fewest_shards(params: float, activations: float, hbm_bytes: float, bytes_per_param: int = 16) -> int:
    """Fewest GPUs over which a fully sharded training state leaves room for
    ``activations`` bytes on each GPU."""
    room = hbm_bytes - activations
    if room <= 0:
        raise ValueError("the activations alone fill the GPU")
    return math.ceil(params * bytes_per_param / room)


@exercise
def check_shard_design(answer: int | None, params: float = 20e9, activations: float = 16e9) -> None:
    """Chapter 1's design problem: fewest 80 GB GPUs for a sharded 16-byte-per-parameter state
    plus ``activations`` bytes per GPU."""
    need(answer, "number of GPUs")
    hbm = A100.hbm_bytes
    want = fewest_shards(params, activations, hbm)
    n = int(answer)
    per_gpu = (params * 16 / n + activations) / 1e9 if n > 0 else float("inf")
    if n != want:
        if n < want:
            raise AssertionError(
                f"on {n} GPUs each holds {params * 16 / n / 1e9:.0f} GB of state + "
                f"{activations / 1e9:.0f} GB of activations = {per_gpu:.0f} GB, more than {hbm / 1e9:.0f} GB"
                + (": the activations need room too" if n == math.ceil(params * 16 / hbm) else "")
            )
        raise AssertionError(
            f"{n} GPUs fit ({per_gpu:.0f} GB each), but so do fewer: find the smallest number"
        )
    passed(f"Correct: {want} GPUs, {per_gpu:.1f} GB used of {hbm / 1e9:.0f} GB each")


def decode_batch(spec: GPUSpec, d: int, dtype: str = "bf16") -> int:
    """Smallest power-of-two batch whose ``(b, d) @ (d, d)`` GEMM reaches the ridge point."""
    b = 1
    while gemm_intensity(b, d) < spec.ridge_point(dtype):
        b *= 2
    return b


def kv_sequences(hbm_bytes: float, weights: float, layers: int, d: int, context: int) -> int:
    """Sequences of ``context`` tokens whose bf16 keys and values fit beside the weights."""
    per_sequence = 2 * layers * d * 2 * context
    return int((hbm_bytes - weights) // per_sequence)


#: The decoding design problem's model: layers, width, bytes of bf16 weights, context (Llama 2 13B's shapes).
DECODE_MODEL = (40, 5120, 26e9, 4096)


@exercise
def check_decode_design(batch: int | None, sequences: int | None) -> None:
    """Chapter 1's second design problem: a 13-billion-parameter model (40 layers,
    ``d = 5120``, bf16 weights of 26 GB, 4096-token contexts) decoding on one A100 80 GB.
    (Not the chapter's worked KV-cache example, 32 layers of 4096, whose numbers it prints.)"""
    need(batch, "batch")
    need(sequences, "sequences")
    layers, d, weights, context = DECODE_MODEL
    want_b = decode_batch(A100, d)
    want_s = kv_sequences(A100.hbm_bytes, weights, layers, d, context)
    ridge, b = A100.ridge_point("bf16"), int(batch)
    if b != want_b:
        at = gemm_intensity(b, d) if b > 0 else 0.0
        where = (
            "below it"
            if at < ridge
            else f"above it, but so is batch {b // 2} ({gemm_intensity(b // 2, d):.0f})"
            if b > 1 and gemm_intensity(b // 2, d) >= ridge
            else "above it"
        )
        raise AssertionError(
            f"batch {batch}: its GEMM does {at:.0f} FLOPs per byte (b d / (2 b + d) in bf16) against the "
            f"A100's bf16 ridge point of {ridge:.0f}: {where}; find the smallest power of two that reaches it"
        )
    per_seq = 2 * layers * d * 2 * context
    assert int(sequences) == want_s, (
        f"{sequences} sequences: one sequence keeps keys and values of {layers} layers x {d} wide x "
        f"{context} tokens x 2 bytes = {per_seq / 1e9:.2f} GB; {(A100.hbm_bytes - weights) / 1e9:.0f} GB "
        f"are left beside the {weights / 1e9:.0f} GB of weights (round down)"
    )
    passed(
        f"Correct: compute-bound from batch {want_b}",
        f"Correct: {want_s} sequences fit, so decoding stays memory-bound",
    )


@exercise
def check_largest_model(answer: float | None, hbm_bytes: float = 80e9) -> None:
    """Lab 1: parameters whose mixed-precision training state fills ``hbm_bytes``."""
    passed(expect(answer, hbm_bytes / 16, "parameters that fit", rel=0.02))


__all__ = [
    "check_activation_bytes",
    "check_decode_design",
    "check_gpus_for_state",
    "check_largest_model",
    "check_occupancy",
    "check_roofline",
    "check_shard_design",
    "decode_batch",
    "fewest_shards",
    "gemm_intensity",
    "kv_sequences",
    "warps_resident",
]
