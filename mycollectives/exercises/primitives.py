"""Link figures and check functions for chapter 2, "Communication primitives".

The alpha-beta model of one message, ``t(n) = alpha + n / bandwidth``, with
the figures the chapter works through (:data:`LINKS`, each with its
sources), and the ``check_*`` functions of the chapter's exercises. Each
check computes the expected value here, from the package, raises
``AssertionError`` with a message that says what is wrong, or prints what
was right. The "implement" exercises whose answer is a collective use
:func:`~mycollectives.exercises.check.check_collective`; the ring shift, which is
not a collective, has its own check here.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..bench.factors import bandwidths, busbw_factor
from ..nccl.constants import BASE_LATENCY, HW_LATENCY


@dataclass(frozen=True)
class Link:
    """One link in the alpha-beta model, with NCCL's latencies: ``base`` seconds once per
    call, ``step`` seconds per step (message) of it, ``bandwidth`` bytes/s one way."""

    name: str
    base: float
    step: float
    bandwidth: float
    sources: str

    @property
    def alpha(self) -> float:
        """The latency of one message sent as a call of its own, ``base + step`` seconds."""
        return self.base + self.step

    @property
    def beta(self) -> float:
        """Seconds per byte."""
        return 1.0 / self.bandwidth

    def time(self, nbytes: float) -> float:
        """``alpha + beta n``: seconds to send ``nbytes`` in one message."""
        return self.alpha + nbytes * self.beta

    def collective_time(self, steps: int, nbytes: float) -> float:
        """A call of ``steps`` steps of ``nbytes`` each: ``base + steps (step + beta n)``.

        NCCL charges its base latency once per collective and the link's latency
        once per step (``nccl_tuning``), not the base on every message.
        """
        return self.base + steps * (self.step + nbytes * self.beta)

    @property
    def half_bandwidth_bytes(self) -> float:
        """``n_1/2 = alpha / beta``: the size at which the two terms are equal."""
        return self.alpha / self.beta


# Latency: NCCL 2.30.7's ring with the Simple protocol (mycollectives.nccl.constants,
# nccl_tuning): a base latency once per call, and a hardware latency per step by
# the link the step crosses. Bandwidth: one direction of the datasheet line rate.
_BASE = BASE_LATENCY["Ring"]["Simple"] * 1e-6  # 8.4 us
_NVLINK = HW_LATENCY["NVLink"]["Ring"]["Simple"] * 1e-6  # 3.4 us
_NET = HW_LATENCY["NET"]["Ring"]["Simple"] * 1e-6  # 14 us
#: The links of chapter 2 by key (``"nvlink4"``, ``"nvlink3"``, ``"ndr"``, ``"hdr"``).
LINKS = {
    # 18 NVLink 4 links x 25 GB/s per direction (nvidia2022h100); 900 GB/s counts both directions
    "nvlink4": Link("NVLink 4, H100 SXM", _BASE, _NVLINK, 18 * 25e9, "nvidia2022h100, nccl_tuning"),
    # 12 NVLink 3 links x 25 GB/s per direction (nvidia2020a100); 600 GB/s counts both directions
    "nvlink3": Link("NVLink 3, A100 SXM", _BASE, _NVLINK, 12 * 25e9, "nvidia2020a100, nccl_tuning"),
    # one ConnectX-7 NDR port, 400 Gb/s (nvidia_connectx7)
    "ndr": Link("InfiniBand NDR, 1 port", _BASE, _NET, 400e9 / 8, "nvidia_connectx7, nccl_tuning"),
    # one ConnectX-6 HDR port, 200 Gb/s (nvidia_connectx6)
    "hdr": Link("InfiniBand HDR, 1 port", _BASE, _NET, 200e9 / 8, "nvidia_connectx6, nccl_tuning"),
}


def _need(answer: object, what: str) -> None:
    assert answer is not None, f"replace None with your answer: {what}"


def _close(answer: float, want: float, what: str, rel: float = 0.02) -> None:
    _need(answer, what)
    got = float(answer)
    assert math.isclose(got, want, rel_tol=rel), (
        f"{what}: got {got:.4g}, expected {want:.4g} "
        f"({'off by a factor ' + format(got / want, '.3g') if want and got else 'wrong'})"
    )
    print(f"Correct: {what} = {got:.4g}")


def _link(name: str) -> Link:
    if name not in LINKS:
        raise ValueError(f"link must be one of {tuple(LINKS)}, got {name!r}")
    return LINKS[name]


def check_message_time(answer: float | None, link: str, nbytes: int) -> None:
    """Chapter 2: seconds for one message of ``nbytes`` on ``LINKS[link]``."""
    lk = _link(link)
    want = lk.time(nbytes)
    if answer is not None and math.isclose(float(answer), nbytes * lk.beta, rel_tol=0.02):
        raise AssertionError(
            f"{answer:.4g} s is the bandwidth term alone: add alpha = {lk.alpha * 1e6:.1f} us"
        )
    if answer is not None and math.isclose(
        float(answer), lk.alpha + nbytes / (2 * lk.bandwidth), rel_tol=0.02
    ):
        raise AssertionError("that uses twice the bandwidth: the link figure to use is one direction")
    _close(answer, want, f"time of {nbytes} bytes on {lk.name} (s)")


def check_half_bandwidth(answer: float | None, link: str) -> None:
    """Chapter 2: ``n_1/2 = alpha / beta`` of ``LINKS[link]``, in bytes."""
    lk = _link(link)
    _close(answer, lk.half_bandwidth_bytes, f"n_1/2 of {lk.name} (bytes)")


def check_bound(answer: str | None, link: str, nbytes: int) -> None:
    """Chapter 2: ``"latency"`` or ``"bandwidth"``: which term is larger for ``nbytes``."""
    _need(answer, '"latency" or "bandwidth"')
    lk = _link(link)
    want = "latency" if lk.alpha > nbytes * lk.beta else "bandwidth"
    assert answer in ("latency", "bandwidth"), f'answer "latency" or "bandwidth", not {answer!r}'
    assert answer == want, (
        f"{nbytes} bytes on {lk.name}: alpha = {lk.alpha * 1e6:.2f} us, n beta = {nbytes * lk.beta * 1e6:.2f} us, "
        f"so the message is {want}-bound"
    )
    print(f"Correct: {nbytes} bytes on {lk.name} is {want}-bound")


def check_ring_latency(answer: float | None, link: str, world_size: int) -> None:
    """Chapter 2: NCCL's latency term of a ring all-reduce of ``world_size`` ranks on ``LINKS[link]``."""
    _need(answer, "latency in seconds")
    lk, steps = _link(link), 2 * (world_size - 1)
    want = lk.collective_time(steps, 0)
    if math.isclose(float(answer), steps * lk.alpha, rel_tol=0.02):
        raise AssertionError(
            f"{answer * 1e6:.1f} us charges the base latency ({lk.base * 1e6:.1f} us) on every one of the "
            f"{steps} steps; NCCL charges it once per collective, and {lk.step * 1e6:.1f} us per step"
        )
    if math.isclose(float(answer), lk.base + (world_size - 1) * lk.step, rel_tol=0.02):
        raise AssertionError(
            f"a ring all-reduce makes 2(p-1) = {steps} steps (reduce-scatter, then all-gather)"
        )
    _close(answer, want, f"latency of the ring all-reduce on {world_size} ranks of {lk.name} (s)")


def check_busbw(answer: float | None, collective: str, nbytes: int, seconds: float, world_size: int) -> None:
    """Chapter 2: nccl-tests' busbw in GB/s of one measured call."""
    _need(answer, "busbw in GB/s")
    algbw, busbw = bandwidths(collective, nbytes, seconds, world_size)
    if math.isclose(float(answer), algbw, rel_tol=0.02) and busbw_factor(collective, world_size) != 1:
        raise AssertionError(
            f"{answer:.4g} GB/s is algbw (size / time); busbw multiplies it by nccl-tests' factor for {collective}"
        )
    if math.isclose(float(answer), busbw * 1e9, rel_tol=0.02):
        raise AssertionError("that is in bytes per second: nccl-tests reports GB/s (1e9 bytes per second)")
    _close(answer, busbw, f"busbw of {collective} on {world_size} ranks (GB/s)")


def check_all_gather_traffic(
    received: float | None, total: float | None, world_size: int, block_bytes: int
) -> None:
    """Chapter 2: bytes each rank must receive in an all-gather, and all ranks together."""
    _need(received, "bytes each rank receives")
    _need(total, "bytes all ranks receive together")
    p, b = world_size, block_bytes
    want_rank, want_total = (p - 1) * b, p * (p - 1) * b
    if math.isclose(float(received), p * b, rel_tol=1e-9):
        raise AssertionError(f"{received} bytes counts the rank's own block, which it already has")
    _close(received, want_rank, f"bytes received per rank (p={p}, block {b} B)", rel=1e-9)
    _close(total, want_total, "bytes received by all ranks together", rel=1e-9)


def _ring_shift_case(fn: Callable, p: int, count: int, dtype: torch.dtype, timeout: float) -> None:
    from ..transport import LocalWorld

    def body(rank: int):
        send = (torch.arange(count) + 1000 * rank).to(dtype)
        recv = torch.full((count,), -1).to(dtype)
        fn(send, recv)
        assert torch.equal(send, (torch.arange(count) + 1000 * rank).to(dtype)), (
            "the send tensor was modified"
        )
        return recv

    world = LocalWorld(p, timeout=timeout, eager_bytes=0)
    out = world.run(body, return_exceptions=True)
    where = f"world size {p}, {count} elements of {dtype}"
    for r, res in enumerate(out):
        if isinstance(res, BaseException):
            hint = ""
            if p == 1:
                hint = " (with one rank, left and right are the rank itself: copy the tensor)"
            raise AssertionError(f"{where}: rank {r} raised {type(res).__name__}: {res}{hint}") from res
    for r, res in enumerate(out):
        left = (r - 1) % p
        want = (torch.arange(count) + 1000 * left).to(dtype)
        if not torch.equal(res, want):
            got = res[:1].tolist()
            raise AssertionError(
                f"{where}: rank {r} should hold rank {left}'s tensor (its left neighbour), "
                f"but its first element is {got} instead of {want[:1].tolist()}"
            )


def check_ring_shift(fn: Callable | None, timeout: float = 5.0) -> int:
    """Chapter 2: ``fn(send, recv)`` sends ``send`` to the right, receives from the left.

    Runs on local worlds with ``eager_bytes=0`` (every send waits for its
    receiver), so an order that only works with buffered sends deadlocks
    here, and the message says who waited on whom. Returns the number of
    cases passed.
    """
    _need(fn, "your ring_shift function")
    n = 0
    for p in (1, 2, 3, 4, 5, 8):
        for count in (0, 1, 5, 17):
            for dtype in (torch.float32, torch.int64):
                _ring_shift_case(fn, p, count, dtype, timeout)
                n += 1
    print(f"Correct: ring shift passed {n} cases (world sizes 1-8, rendezvous sends)")
    return n


__all__ = [
    "LINKS",
    "Link",
    "check_all_gather_traffic",
    "check_bound",
    "check_busbw",
    "check_half_bandwidth",
    "check_message_time",
    "check_ring_latency",
    "check_ring_shift",
]
