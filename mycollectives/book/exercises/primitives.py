"""Link figures and check functions for chapter 2, "Communication primitives".

The alpha-beta model of one message, ``t(n) = alpha + n / bandwidth``, with
the figures the chapter works through (:data:`LINKS`, each with its
sources), and the ``check_*`` functions of the chapter's exercises. Each
check computes the expected value here, from the package, raises
``AssertionError`` with a message that says what is wrong, or prints what
was right. The "implement" exercises whose answer is a collective use
:func:`~mycollectives.book.exercises.check.check_collective`; the ring shift, which is
not a collective, has its own check here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from ...bench.factors import bandwidths, busbw_factor
from ...nccl.constants import BASE_LATENCY, HW_LATENCY
from .answers import exercise, expect, near, need, number, passed


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


def _link(name: str) -> Link:
    if name not in LINKS:
        raise ValueError(f"link must be one of {tuple(LINKS)}, got {name!r}")
    return LINKS[name]


def _message_time(answer: object, link: str, nbytes: int) -> str:
    lk = _link(link)
    what = f"time of {nbytes} bytes on {lk.name} (s)"
    got = number(answer, what)
    if near(got, nbytes * lk.beta, 0.02):
        raise AssertionError(f"{got:.4g} s is the bandwidth term alone: add alpha = {lk.alpha * 1e6:.1f} us")
    if near(got, lk.alpha + nbytes / (2 * lk.bandwidth), 0.02):
        raise AssertionError("that uses twice the bandwidth: the link figure to use is one direction")
    if near(got, lk.step + nbytes * lk.beta, 0.02):
        raise AssertionError(
            f"a message sent on its own is a call of one step: it pays the base latency "
            f"({lk.base * 1e6:.1f} us) as well as the step's ({lk.step * 1e6:.1f} us)"
        )
    return expect(got, lk.time(nbytes), what, rel=0.02)


def _half_bandwidth(answer: object, link: str) -> str:
    lk = _link(link)
    return expect(answer, lk.half_bandwidth_bytes, f"n_1/2 of {lk.name} (bytes)", rel=0.02)


def _bound(answer: object, link: str, nbytes: int) -> str:
    need(answer, '"latency" or "bandwidth"')
    lk = _link(link)
    want = "latency" if lk.alpha > nbytes * lk.beta else "bandwidth"
    assert answer in ("latency", "bandwidth"), f'answer "latency" or "bandwidth", not {answer!r}'
    assert answer == want, (
        f"{nbytes} bytes on {lk.name}: alpha = {lk.alpha * 1e6:.2f} us, n beta = {nbytes * lk.beta * 1e6:.2f} us, "
        f"so the message is {want}-bound"
    )
    return f"Correct: {nbytes} bytes on {lk.name} is {want}-bound"


@exercise
def check_message_time(answer: float | None, link: str, nbytes: int) -> None:
    """Chapter 2: seconds for one message of ``nbytes`` on ``LINKS[link]``."""
    passed(_message_time(answer, link, nbytes))


@exercise
def check_half_bandwidth(answer: float | None, link: str) -> None:
    """Chapter 2: ``n_1/2 = alpha / beta`` of ``LINKS[link]``, in bytes."""
    passed(_half_bandwidth(answer, link))


@exercise
def check_bound(answer: str | None, link: str, nbytes: int) -> None:
    """Chapter 2: ``"latency"`` or ``"bandwidth"``: which term is larger for ``nbytes``."""
    passed(_bound(answer, link, nbytes))


@exercise
def check_alpha_beta(
    t_nvlink: float | None, t_ib: float | None, n_half_ib: float | None, bound_64k: str | None
) -> None:
    """Chapter 2's first exercise, every part checked before any is reported: 1 MiB on
    NVLink 4 and on NDR, NDR's half-bandwidth size, and whether 64 KiB on NVLink 4 is
    latency- or bandwidth-bound."""
    mib = 1 << 20
    passed(
        _message_time(t_nvlink, "nvlink4", mib),
        _message_time(t_ib, "ndr", mib),
        _half_bandwidth(n_half_ib, "ndr"),
        _bound(bound_64k, "nvlink4", 64 << 10),
    )


@exercise
def check_ring_latency(answer: float | None, link: str, world_size: int) -> None:
    """Chapter 2: NCCL's latency term of a ring all-reduce of ``world_size`` ranks on ``LINKS[link]``."""
    lk, steps = _link(link), 2 * (world_size - 1)
    what = f"latency of the ring all-reduce on {world_size} ranks of {lk.name} (s)"
    got = number(answer, what)
    if near(got, steps * lk.alpha, 0.02):
        raise AssertionError(
            f"{got * 1e6:.1f} us charges the base latency ({lk.base * 1e6:.1f} us) on every one of the "
            f"{steps} steps; NCCL charges it once per collective, and {lk.step * 1e6:.1f} us per step"
        )
    if near(got, lk.base + (world_size - 1) * lk.step, 0.02):
        raise AssertionError(
            f"a ring all-reduce makes 2(p-1) = {steps} steps (reduce-scatter, then all-gather)"
        )
    passed(expect(got, lk.collective_time(steps, 0), what, rel=0.02))


@exercise
def check_busbw(answer: float | None, collective: str, nbytes: int, seconds: float, world_size: int) -> None:
    """Chapter 2: nccl-tests' busbw in GB/s of one measured call. The world size must be one at
    which busbw differs from algbw (an all-reduce on two ranks has factor 1: skipping the factor would pass)."""
    need(answer, f"busbw of {collective} on {world_size} ranks (GB/s)")
    if busbw_factor(collective, world_size) == 1:
        raise ValueError(
            f"world_size={world_size}: busbw equals algbw for {collective} there, so the exercise could not "
            "tell them apart; ask at a world size whose factor is not 1"
        )
    passed(_busbw(answer, collective, nbytes, seconds, world_size))


def _busbw(answer: object, collective: str, nbytes: int, seconds: float, world_size: int) -> str:
    what = f"busbw of {collective} on {world_size} ranks (GB/s)"
    got = number(answer, what)
    algbw, busbw = bandwidths(collective, nbytes, seconds, world_size)
    if near(got, algbw, 0.02) and busbw_factor(collective, world_size) != 1:
        raise AssertionError(
            f"{got:.4g} GB/s is algbw (size / time); busbw multiplies it by nccl-tests' factor for {collective}"
        )
    if near(got, busbw * 1e9, 0.02):
        raise AssertionError("that is in bytes per second: nccl-tests reports GB/s (1e9 bytes per second)")
    return expect(got, busbw, what, rel=0.02)


def _all_gather_traffic(received: object, total: object, world_size: int, block_bytes: int) -> list[str]:
    p, b = world_size, block_bytes
    got = number(received, "bytes each rank receives")
    if near(got, p * b, 1e-9):
        raise AssertionError(f"{received} bytes counts the rank's own block, which it already has")
    return [
        expect(got, (p - 1) * b, f"bytes received per rank (p={p}, block {b} B)", rel=1e-9),
        expect(total, p * (p - 1) * b, "bytes received by all ranks together", rel=1e-9),
    ]


@exercise
def check_all_gather_traffic(
    received: float | None, total: float | None, world_size: int, block_bytes: int
) -> None:
    """Chapter 2: bytes each rank must receive in an all-gather, and all ranks together."""
    passed(*_all_gather_traffic(received, total, world_size, block_bytes))


@exercise
def check_traffic_and_busbw(received: float | None, total: float | None, busbw: float | None) -> None:
    """Chapter 2's traffic exercise, both parts checked before either is reported: an
    all-gather of 2 MiB blocks on 16 ranks, and the busbw of a 64 MiB one that took 1.2 ms."""
    passed(
        *_all_gather_traffic(received, total, 16, 2 << 20), _busbw(busbw, "all_gather", 64 << 20, 1.2e-3, 16)
    )


def _ring_shift_case(fn: Callable, p: int, count: int, dtype: torch.dtype, timeout: float) -> None:
    from ...transport import LocalWorld

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


@exercise
def check_ring_shift(fn: Callable | None, timeout: float = 5.0) -> None:
    """Chapter 2: ``fn(send, recv)`` sends ``send`` to the right, receives from the left.

    Runs on local worlds with ``eager_bytes=0`` (every send waits for its
    receiver), so an order that only works with buffered sends deadlocks
    here, and the message says who waited on whom. The world of one rank
    comes last, so that the deadlock, the lesson of the exercise, is what a
    send-then-receive ring reports first.
    """
    need(fn, "your ring_shift function")
    n = 0
    for p in (2, 3, 4, 5, 8, 1):
        for count in (0, 1, 5, 17):
            for dtype in (torch.float32, torch.int64):
                _ring_shift_case(fn, p, count, dtype, timeout)
                n += 1
    passed(f"Correct: ring shift passed {n} cases (world sizes 1-8, rendezvous sends)")


__all__ = [
    "LINKS",
    "Link",
    "check_all_gather_traffic",
    "check_alpha_beta",
    "check_bound",
    "check_busbw",
    "check_half_bandwidth",
    "check_message_time",
    "check_ring_latency",
    "check_ring_shift",
    "check_traffic_and_busbw",
]
