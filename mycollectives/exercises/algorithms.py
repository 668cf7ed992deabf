"""Check functions for the numeric exercises of chapter 3 ("Algorithms").

Each ``check_*`` computes the expected value from the package itself (the
schedule that :func:`~mycollectives.algorithms.registry.schedule_for` returns, or the cost
model of :mod:`mycollectives.cost`), raises ``AssertionError`` with a message
that says what is wrong, or prints what was right. The "implement this
algorithm" exercises of the chapter use ``check_collective`` from
``mycollectives.exercises`` instead.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..algorithms import DEFAULT_SEGMENT_BYTES, canonical, schedule_for
from ..cost import Machine, crossover_size, traffic


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


def check_rounds_and_bytes(
    answer: Sequence[int] | None, collective: str, algorithm: str, world_size: int, nbytes: int
) -> None:
    """Chapter 3: ``answer = (rounds, bytes the busiest rank sends)`` of a schedule."""
    what = f"{canonical(collective)}/{algorithm} on {world_size} ranks, {nbytes} bytes"
    assert answer is not None, f"replace None with your answer (rounds, bytes) for {what}"
    assert len(answer) == 2, f"{what}: give a pair (rounds, bytes), got {answer!r}"
    rounds, sent = answer
    want_rounds, want_sent = busiest_sender(collective, algorithm, world_size, nbytes)
    assert rounds == want_rounds, f"{what}: the schedule has {want_rounds} rounds, not {rounds}" + (
        " (with a world size that is not a power of two, count the rounds that fold the extra ranks in and out)"
        if world_size & (world_size - 1)
        else ""
    )
    assert math.isclose(sent, want_sent, rel_tol=1e-9), (
        f"{what}: the busiest rank sends {want_sent} bytes ({want_sent / nbytes:.3f} of the vector), "
        f"not {sent} ({sent / nbytes:.3f}); count what the busiest rank sends, summed over all rounds"
    )
    print(f"Correct: {what}: {rounds} rounds, the busiest rank sends {sent} bytes")


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
    assert answer is not None, f"replace None with your answer in bytes: {what}"
    want = crossover_size(collective, first, second, world_size, machine)
    assert want is not None, f"{what}: {second} never overtakes {first} on this machine"
    assert math.isclose(float(answer), want, rel_tol=rel), (
        f"{what}: got {float(answer):,.0f} bytes, the model gives {want:,} "
        f"(off by {100 * (float(answer) / want - 1):+.0f}%); set the two costs equal and solve for n"
    )
    print(f"Correct: {what} at {float(answer):,.0f} bytes (the model's bisection: {want:,})")


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


def check_pat_messages(
    answer: Sequence[int] | None, world_size: int, block_bytes: int, slot_bytes: int = DEFAULT_SEGMENT_BYTES
) -> None:
    """Chapter 3: ``answer = (messages per rank, bytes of the largest message)`` of PAT's all-gather."""
    what = f"PAT all-gather, {world_size} ranks, {block_bytes} B blocks, {slot_bytes} B slots"
    assert answer is not None, f"replace None with your answer (messages, bytes): {what}"
    assert len(answer) == 2, f"{what}: give a pair (messages, bytes of the largest), got {answer!r}"
    messages, largest = answer
    want_messages, want_largest = pat_messages(world_size, block_bytes, slot_bytes)
    assert largest == want_largest, (
        f"{what}: the largest message is {want_largest} bytes, not {largest}; a message holds the largest "
        "power of two of blocks that fits a slot (at least one, and no more than the distance-1 step sends)"
    )
    assert messages == want_messages, (
        f"{what}: each rank sends {want_messages} messages, not {messages}; count each distance's blocks "
        "(offsets 0, 2^(d+1), ... below p - 2^d) and divide by the blocks per message, rounding up"
    )
    print(f"Correct: {what}: {messages} messages, the largest {largest} B")


def network_bytes(collective: str, algorithm: str, world_size: int, local_size: int, nbytes: int) -> int:
    """Bytes the busiest rank sends to other nodes of ``local_size`` ranks (float32), from the schedule."""
    s = schedule_for(collective, algorithm, world_size, nbytes, local_size=local_size)
    return int(traffic(s, local_size=local_size)[0].max())


def check_network_bytes(
    answer: float | None, collective: str, algorithm: str, world_size: int, local_size: int, nbytes: int
) -> None:
    """Chapter 4: the bytes the busiest rank sends over the network (to ranks on other nodes)."""
    what = (
        f"{canonical(collective)}/{algorithm}, {world_size // local_size} nodes of {local_size}, "
        f"size {nbytes}: bytes across nodes"
    )
    assert answer is not None, f"replace None with your answer: {what}"
    want = network_bytes(collective, algorithm, world_size, local_size, nbytes)
    assert math.isclose(float(answer), want, rel_tol=1e-9), (
        f"{what}: {want} bytes ({want / nbytes:.4f} of the size), not {float(answer):.0f}; "
        "count only the transfers whose two ranks are on different nodes"
    )
    print(f"Correct: {what} = {want}")


__all__ = [
    "busiest_sender",
    "check_crossover",
    "check_network_bytes",
    "check_pat_messages",
    "check_rounds_and_bytes",
    "network_bytes",
    "pat_messages",
]
