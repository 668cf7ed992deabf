"""Checks for the exercises of the page on loads and stores (chapter 4b).

Every expected value is computed from the package: the schedules
(:func:`~mycollectives.algorithms.schedule_for`), the bytes they move
(:func:`~mycollectives.cost.traffic`), the barriers :mod:`mycollectives.loadstore`
takes (:func:`barriers`) and the load/store cost model
(``Machine(loads=True)``). A wrong answer is told what it most likely left out.
"""

from __future__ import annotations

import math

from ...algorithms import schedule_for
from ...cost import Machine, counted_cost, traffic
from ...loadstore import reads
from .answers import correct, exercise, need, off

MIB = 1 << 20


# --- copies: messages against loads ----------------------------------------------------


def copied_bytes(collective: str, algorithm: str, p: int, nbytes: int) -> tuple[float, float]:
    """Bytes the busiest rank copies in one call: over the shared-memory
    transport (each message is written into a shared region by its sender and
    read out by its receiver) and as loads (the receiver reads the sender's
    buffer where it lies)."""
    sent, received = traffic(schedule_for(collective, algorithm, p, nbytes))
    return float((sent + received).max()), float(received.max())


@exercise
def check_copies(messages: float | None, loads: float | None, p: int = 8, nbytes: int = 32 * MIB) -> None:
    """MiB one rank copies in a ring all-gather: message passing against loads (the page's own example
    prints 4 ranks and 64 MiB, so the exercise asks for 8 ranks and 32 MiB)."""
    want_msg, want_loads = (b / MIB for b in copied_bytes("all_gather", "ring", p, nbytes))
    need(messages, "MiB copied with messages")
    need(loads, "MiB copied with loads")
    if math.isclose(float(messages), want_loads, rel_tol=0.02):
        raise AssertionError(
            "with messages every byte is copied twice: into the shared region by its sender, "
            "then out of it by its receiver; a rank does both, for what it sends and what it receives"
        )
    if math.isclose(float(loads), nbytes / MIB, rel_tol=0.02):
        raise AssertionError(f"a rank already holds its own 1/{p} of the output: it loads only the rest")
    for got, want, what in ((messages, want_msg, "with messages"), (loads, want_loads, "with loads")):
        assert math.isclose(float(got), want, rel_tol=0.02), (
            f"MiB copied per rank {what}: got {float(got):.4g}, {off(float(got), want)}"
        )
    print(f"Correct: {float(messages):.4g} MiB with messages, {float(loads):.4g} MiB with loads")


# --- barriers -----------------------------------------------------------------------------


def barriers(collective: str, algorithm: str, p: int, nbytes: int = 1 << 16, check: bool = True) -> int:
    """Barriers one call takes on symmetric memory: the argument check's (one,
    which also stands for the first round's), one before every later round,
    one before a round's late writes, and one after the last round unless that
    round ended with late writes (:func:`mycollectives.loadstore.execute`)."""
    plan = reads(schedule_for(collective, algorithm, p, nbytes), 0)
    count = 1  # the argument check's, or the first round's
    count += max(len(plan) - 1, 0)
    count += sum(1 for _, late in plan if late)
    if plan and not plan[-1][1]:
        count += 1
    return count


@exercise
def check_barriers(answers: dict | None, p: int = 4) -> None:
    """Barriers per all-reduce call with the argument check on: ring, direct (two-shot), one_shot."""
    need(answers, "a dict {algorithm: barriers}")
    wrong = []
    for algorithm in ("ring", "direct", "one_shot"):
        want = barriers("all_reduce", algorithm, p)
        got = answers.get(algorithm)
        if got is None:
            wrong.append(f"{algorithm}: missing")
        elif int(got) != want:
            hint = {
                "ring": f"the ring has {2 * (p - 1)} rounds, and its reductions never land on a region "
                "a peer reads in the same round",
                "direct": "two rounds (reduce-scatter, all-gather) and no late writes",
                "one_shot": "one round whose writes land on the vector the peers are reading: "
                "they wait for a barrier, which is then also the last",
            }[algorithm]
            wrong.append(f"{algorithm}: got {got}, {hint}")
    assert not wrong, "; ".join(wrong)
    print(
        f"Correct: ring {answers['ring']}, direct {answers['direct']}, one_shot {answers['one_shot']} barriers"
    )


# --- one-shot against two-shot ---------------------------------------------------------------


def crossover(p: int, machine: Machine, lo: int = 64, hi: int = 1 << 30) -> float:
    """The nccl-tests size (bytes) above which two-shot (``direct``) beats
    one-shot on ``machine``, from the counted costs (bisection on a log scale)."""

    def gap(n: float) -> float:  # two-shot minus one-shot: positive while one-shot is faster
        n = max(int(n) // (4 * p) * 4 * p, 4 * p)
        one = counted_cost(schedule_for("all_reduce", "one_shot", p, n), machine)
        two = counted_cost(schedule_for("all_reduce", "direct", p, n), machine)
        return two - one

    if gap(lo) <= 0:
        return float(lo)
    if gap(hi) > 0:
        return float("inf")
    a, b = math.log(lo), math.log(hi)
    for _ in range(50):
        m = (a + b) / 2
        a, b = (m, b) if gap(math.exp(m)) > 0 else (a, m)
    return math.exp(b)


@exercise
def check_crossover(answer: float | None, p: int = 2, alpha: float = 10e-6, beta: float = 1.5e-10,
                    gamma: float = 0.5e-10) -> None:  # fmt: skip
    """The size where two-shot overtakes one-shot on 2 ranks, on a machine of the given
    constants (``beta != gamma``, so that each typical mistake gives its own number and hint)."""
    if p != 2 or math.isclose(beta, gamma):
        raise ValueError(f"p={p}, beta={beta}, gamma={gamma}: the exercise is on 2 ranks, with beta != gamma")
    want = crossover(p, Machine(alpha=alpha, beta=beta, gamma=gamma, loads=True))
    need(answer, "crossover size in bytes")
    got = float(answer)
    if math.isclose(got, alpha / gamma, rel_tol=0.05):
        raise AssertionError(
            "two-shot adds too: the peer's half of its own share, n/2 adds, so it saves n/2 of "
            "one-shot's adds, not all n"
        )
    if math.isclose(got, 2 * alpha / (beta + gamma), rel_tol=0.05):
        raise AssertionError(
            "two-shot reads twice: the peer's half of its own share, then the peer's reduced half; "
            "its loads cost as much as one-shot's, only its adds are halved"
        )
    correct(float(answer) / 1024, want / 1024, f"crossover on {p} ranks", " KiB", rel=0.05)


# --- design: an NVLink node ---------------------------------------------------------------


def nvlink_choice(p: int, nbytes: int, link: float, sync: float) -> dict[str, float]:
    """Seconds of a symmetric-memory all-reduce on ``p`` GPUs joined by a
    switch, each GPU's link ``link`` bytes/s per direction and a barrier
    ``sync`` seconds; adds are free (they run at memory speed, far above the
    link). One-shot reads (p-1)n in one round; two-shot reads 2(p-1)/p n in
    two; in-switch reduction (multimem), in two barriers, moves n(1 + 1/p)
    each way through a GPU's link: the switch reads the GPU's whole vector and
    multicasts every sum into it (n), and the GPU's reduced load and store of
    its own 1/p add n/p (chapter 4, and chapter 6's ``check_nvls_link_rate``)."""
    n = float(nbytes)
    return {
        "one_shot": sync + (p - 1) * n / link,
        "two_shot": 2 * sync + 2 * (p - 1) / p * n / link,
        "multimem": 2 * sync + (1 + 1 / p) * n / link,
    }


@exercise
def check_nvlink_choice(
    times: dict | None, p: int = 8, link: float = 450e9, sync: float = 3e-6, small: int = 256 << 10,
    large: int = 64 * MIB,
) -> None:  # fmt: skip
    """The times of one-shot, two-shot and multimem at a small and a large size."""
    need(times, "a dict {(algorithm, size): seconds}")
    wrong = []
    for size in (small, large):
        want = nvlink_choice(p, size, link, sync)
        for name, sec in want.items():
            got = times.get((name, size))
            if got is None:
                wrong.append(f"({name!r}, {size}) missing")
            elif not math.isclose(float(got), sec, rel_tol=0.03):
                wrong.append(f"{name} at {size} B: got {float(got) * 1e6:.2f} us, {off(float(got), sec)}")
    assert not wrong, "; ".join(wrong)
    print(f"Correct: all {len(times)} times within 3 %")


@exercise
def check_heap_picks(small: str | None, large: str | None, p: int = 4) -> None:
    """Chapter 4b design: the all-reduce for 16 KiB and 16 MiB heap tensors on ``p`` ranks."""
    from ...auto import LOADSTORE, choose

    need(small, "the algorithm for 16 KiB")
    need(large, "the algorithm for 16 MiB")
    x = crossover(p, LOADSTORE)
    wrong = []
    for got, size in ((small, 16 << 10), (large, 16 << 20)):
        want = choose("all_reduce", p, size, heap=True)
        if got != want:
            side = "below" if size < x else "above"
            wrong.append(
                f"{size >> 10} KiB is {side} the crossover: compare one-shot's and two-shot's costs there"
            )
    assert not wrong, "; ".join(wrong)
    print(f"Correct: {small} for 16 KiB, {large} for 16 MiB (crossover {x / 1024:.1f} KiB)")
