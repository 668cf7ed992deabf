"""Check functions for the numeric exercises of chapter 3 ("Algorithms").

Each ``check_*`` computes the expected value from the package itself (the
schedule that :func:`~mycollectives.algorithms.registry.schedule_for` returns, or the cost
model of :mod:`mycollectives.cost`), raises ``AssertionError`` with a message
that says what is wrong, or prints what was right once every part is. The
"implement this algorithm" exercises of the chapter use ``check_collective``
from ``mycollectives.book.exercises`` instead. The two design problems
(:func:`check_all_reduce_design`, :func:`check_broadcast_design`) ask for a
choice and its time, and say why a wrong choice loses.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ...algorithms import DEFAULT_SEGMENT_BYTES, canonical, schedule_for
from ...cost import Machine, counted_cost, crossover_size, predict, traffic
from .answers import exercise, expect, need, number, off, passed


def busiest_sender(collective: str, algorithm: str, world_size: int, nbytes: int) -> tuple[int, int]:
    """Rounds of the schedule, and the bytes its busiest rank sends (float32).

    ``nbytes`` is nccl-tests' size of the call: the whole vector for
    broadcast, reduce and all-reduce, all ``p`` blocks for the block
    collectives. Local copies (a rank to itself) are not counted.
    Introduced in the book's chapter 3 ("Rounds, and the two lower bounds").
    """
    schedule = schedule_for(collective, algorithm, world_size, nbytes)
    sent, _ = traffic(schedule)
    return len(schedule.rounds), int(sent.max()) if world_size else 0


def _side(got: int, want: int) -> str:
    """Too high or too low, for counts (the count itself would give the answer away)."""
    return "too high" if got > want else "too low"


def _rounds_and_bytes(answer: object, collective: str, algorithm: str, world_size: int, nbytes: int) -> str:
    what = f"{canonical(collective)}/{algorithm} on {world_size} ranks, {nbytes} bytes"
    need(answer, f"(rounds, bytes) for {what}")
    assert len(answer) == 2, f"{what}: give a pair (rounds, bytes), got {answer!r}"  # type: ignore[arg-type]
    rounds, sent = answer  # type: ignore[misc]
    want_rounds, want_sent = busiest_sender(collective, algorithm, world_size, nbytes)
    assert rounds == want_rounds, f"{what}: {rounds} rounds is {_side(rounds, want_rounds)}" + (
        " (with a world size that is not a power of two, count the rounds that fold the extra ranks in and out)"
        if world_size & (world_size - 1)
        else ""
    )
    assert math.isclose(sent, want_sent, rel_tol=1e-9), (
        f"{what}: {sent} bytes ({sent / nbytes:.3f} of the vector) is {off(sent, want_sent)}; "
        "count what the busiest rank sends, summed over all rounds"
    )
    return f"Correct: {algorithm}: {rounds} rounds, the busiest rank sends {sent:,} bytes"


@exercise
def check_rounds_and_bytes(
    answer: Sequence[int] | None, collective: str, algorithm: str, world_size: int, nbytes: int
) -> None:
    """Chapter 3: ``answer = (rounds, bytes the busiest rank sends)`` of a schedule."""
    passed(_rounds_and_bytes(answer, collective, algorithm, world_size, nbytes))


@exercise
def check_ring_and_doubling(ring_answer: Sequence[int] | None, rd_answer: Sequence[int] | None) -> None:
    """Chapter 3's counting exercise, both parts checked before either is reported:
    ring and recursive doubling all-reduce on 6 ranks, 3 MiB."""
    passed(
        _rounds_and_bytes(ring_answer, "all_reduce", "ring", 6, 3 << 20),
        _rounds_and_bytes(rd_answer, "all_reduce", "recursive_doubling", 6, 3 << 20),
    )


@exercise
def check_crossover(
    answer: float | None,
    collective: str,
    first: str,
    second: str,
    world_size: int,
    machine: Machine,
    rel: float = 0.01,
) -> None:
    """Chapter 3: the size in bytes from which ``second`` is no slower than ``first``.

    The expected value is :func:`mycollectives.cost.crossover_size` on the
    closed forms; answers within ``rel`` of it pass (it is found by bisection
    on whole elements, so an exact derivation lands a few bytes away).
    """
    what = f"crossover of {canonical(collective)} {first} -> {second} on {world_size} ranks"
    need(answer, f"bytes: {what}")
    want = crossover_size(collective, first, second, world_size, machine)
    assert want is not None, f"{what}: {second} never overtakes {first} on this machine"
    assert math.isclose(float(answer), want, rel_tol=rel), (
        f"{what}: got {float(answer):,.0f} bytes, {off(float(answer), want)}; "
        "set the two costs equal and solve for n"
    )
    passed(f"Correct: {second} overtakes {first} from {float(answer):,.0f} bytes")


def pat_messages(
    world_size: int, block_bytes: int, slot_bytes: int = DEFAULT_SEGMENT_BYTES
) -> tuple[int, int]:
    """Messages each rank sends in PAT's all-gather, and the bytes of the largest (float32).

    ``block_bytes`` is one rank's block; ``slot_bytes`` NCCL's buffer slot
    (the schedule's segment). Counted from the schedule. Chapter 3, "PAT".
    """
    s = schedule_for("all_gather", "pat", world_size, world_size * block_bytes, segment_bytes=slot_bytes)
    p, messages, largest = world_size, np.zeros(world_size, np.int64), 0
    for r in s.rounds:
        pair = r.src * p + r.dst
        sizes = np.bincount(pair, weights=r.count * 4, minlength=p * p)  # bytes per (src, dst)
        messages += np.count_nonzero(sizes.reshape(p, p), axis=1)
        largest = max(largest, int(sizes.max()))
    return int(messages.max()), largest


@exercise
def check_pat_messages(
    answer: Sequence[int] | None, world_size: int, block_bytes: int, slot_bytes: int = DEFAULT_SEGMENT_BYTES
) -> None:
    """Chapter 3: ``answer = (messages per rank, bytes of the largest message)`` of PAT's all-gather."""
    what = f"PAT all-gather, {world_size} ranks, {block_bytes} B blocks, {slot_bytes} B slots"
    need(answer, f"(messages, bytes): {what}")
    assert len(answer) == 2, f"{what}: give a pair (messages, bytes of the largest), got {answer!r}"
    messages, largest = answer
    want_messages, want_largest = pat_messages(world_size, block_bytes, slot_bytes)
    assert largest == want_largest, (
        f"{what}: a largest message of {largest} bytes is {_side(largest, want_largest)}; a message holds the largest "
        "power of two of blocks that fits a slot (at least one, and no more than the distance-1 step sends)"
    )
    assert messages == want_messages, (
        f"{what}: {messages} messages per rank is {_side(messages, want_messages)}; count each distance's blocks "
        "(offsets 0, 2^(d+1), ... below p - 2^d) and divide by the blocks per message, rounding up"
    )
    passed(f"Correct: PAT on {world_size} ranks: {messages} messages, the largest {largest:,} B")


#: The all-reduce design problem's machine, for 24 ranks, 10 us per message, 25 GB/s and no reduction cost.
DESIGN_MACHINE = Machine(alpha=10e-6, beta=1 / 25e9, gamma=0.0)
DESIGN_ALL_REDUCE = ("ring", "recursive_doubling", "rabenseifner", "reduce_broadcast", "double_binary_tree")


def choice_line(answer: object, collective: str, p: int, nbytes: int, machine: Machine, menu) -> str:
    """Check ``answer = (algorithm, seconds)`` against the fastest of ``menu`` by the
    counted cost (ties: any of the fastest); return the success line."""
    what = f"{collective} of {nbytes:,} bytes on {p} ranks"
    need(answer, f"(algorithm, seconds) for the {what}")
    assert len(answer) == 2, f"{what}: give a pair (algorithm, seconds), got {answer!r}"  # type: ignore[arg-type]
    name, seconds = answer  # type: ignore[misc]
    times = predict(collective, p, nbytes, machine, candidates=menu)
    least = min(times.values())
    best = [a for a, t in times.items() if t <= least * (1 + 1e-9)]  # ties: any of them
    assert name in times, f"{what}: choose one of {tuple(times)}, not {name!r}"
    if name not in best:
        raise AssertionError(
            f"{what}: {name} takes {times[name] * 1e6:,.1f} us, {times[name] / least:.1f}x the "
            f"fastest; compare each candidate's latency term (rounds x alpha) and bandwidth term "
            f"(bytes the busiest rank sends x beta) at this size"
        )
    tie = f" (ties with {', '.join(a for a in best if a != name)})" if len(best) > 1 else ""
    return expect(seconds, least, f"{name}{tie}, time (s)", rel=0.02)


@exercise
def check_all_reduce_design(small: Sequence | None, large: Sequence | None) -> None:
    """Chapter 3's first design problem: the all-reduce for 8 KiB and for 1 GiB on
    24 ranks of ``DESIGN_MACHINE``, each as ``(algorithm, seconds)``."""
    passed(
        choice_line(small, "all_reduce", 24, 8 << 10, DESIGN_MACHINE, DESIGN_ALL_REDUCE),
        choice_line(large, "all_reduce", 24, 1 << 30, DESIGN_MACHINE, DESIGN_ALL_REDUCE),
    )


@exercise
def check_broadcast_design(
    algorithm: str | None, segments: int | None, seconds: float | None, world_size: int = 32
) -> None:
    """Chapter 3's second design problem: broadcasting 2 GiB to ``world_size`` ranks at
    5 us and 10 GB/s; the algorithm, the chain's segment count and the time."""
    n, m = 2 << 30, Machine(alpha=5e-6, beta=1e-10)
    need(algorithm, '"binomial", "scatter_allgather" or "chain"')
    fixed = {
        a: counted_cost(schedule_for("broadcast", a, world_size, n), m)
        for a in ("binomial", "scatter_allgather")
    }
    assert algorithm in ("binomial", "scatter_allgather", "chain"), (
        f"choose one of the three, not {algorithm!r}"
    )
    s_star = math.sqrt((world_size - 2) * n * m.beta / m.alpha)
    best_chain = min(
        counted_cost(schedule_for("broadcast", "chain", world_size, n, segment_bytes=n // k), m)
        for k in (2 ** math.floor(math.log2(s_star)), 2 ** math.ceil(math.log2(s_star)))
    )
    assert algorithm == "chain", (
        f"{algorithm} takes {fixed[algorithm] * 1e3:.0f} ms, {fixed[algorithm] / best_chain:.1f}x "
        "the best: which candidate sends the vector across each link once, with every link busy?"
    )
    k = int(number(segments, "segments"))
    assert s_star / 2 <= k <= 2 * s_star, (
        f"{k} segments: the best count is S* = sqrt((p-2) n beta / alpha) = {s_star:.0f}; "
        + ("too few: each segment's bytes wait at every hop" if k < s_star else "too many: each pays alpha")
    )
    t = counted_cost(schedule_for("broadcast", "chain", world_size, n, segment_bytes=-(-n // k)), m)
    passed(
        f"Correct: chain; scatter + all-gather {fixed['scatter_allgather'] * 1e3:.0f} ms, "
        f"binomial {fixed['binomial'] * 1e3:.0f} ms",
        expect(
            seconds, t, f"chain, {k} segments, time (s)", rel=0.02, hint="(p - 2 + S)(alpha + n beta / S)"
        ),
    )


def network_bytes(collective: str, algorithm: str, world_size: int, local_size: int, nbytes: int) -> int:
    """Bytes the busiest rank sends to other nodes of ``local_size`` ranks (float32), from the schedule."""
    s = schedule_for(collective, algorithm, world_size, nbytes, local_size=local_size)
    return int(traffic(s, local_size=local_size)[0].max())


@exercise
def check_network_bytes(
    answer: float | None, collective: str, algorithm: str, world_size: int, local_size: int, nbytes: int
) -> None:
    """Chapter 4: the bytes the busiest rank sends over the network (to ranks on other nodes)."""
    what = (
        f"{canonical(collective)}/{algorithm}, {world_size // local_size} nodes of {local_size}, "
        f"size {nbytes}: bytes across nodes"
    )
    need(answer, what)
    want = network_bytes(collective, algorithm, world_size, local_size, nbytes)
    assert math.isclose(float(answer), want, rel_tol=1e-9), (
        f"{what}: {float(answer):.0f} bytes is {off(float(answer), want)}; "
        "count only the transfers whose two ranks are on different nodes"
    )
    print(f"Correct: {what}")


__all__ = [
    "busiest_sender",
    "check_all_reduce_design",
    "check_broadcast_design",
    "check_crossover",
    "check_network_bytes",
    "check_pat_messages",
    "check_ring_and_doubling",
    "choice_line",
    "check_rounds_and_bytes",
    "network_bytes",
    "pat_messages",
]
