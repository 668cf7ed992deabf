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

from ..algorithms import canonical, schedule_for
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


__all__ = ["busiest_sender", "check_crossover", "check_rounds_and_bytes"]
