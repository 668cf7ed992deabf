"""Every schedule in the menu, proved correct by symbolic execution for p = 1..16."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from conftest import MENU, options_for

from mycollectives.algorithms import Spec, build
from mycollectives.collectives import record
from mycollectives.schedule import WORK, Round, Schedule, ceil_log2, split
from mycollectives.verify import VerificationError, verify


def specs(collective: str, algorithm: str, p: int):
    """Calls of awkward sizes and roots, as the collective's record draws them (uneven splits included)."""
    rng = np.random.default_rng(p)
    roots = sorted({0, p // 2, p - 1}) if record(collective).rooted else [0]
    for n in sorted({0, 1, p - 1, p + 3, 3 * p, 2 * p + 1}):
        for root in roots:
            spec = record(collective).example(p, n, root, rng)
            yield dataclasses.replace(spec, **options_for(collective, algorithm, p))


def check_verifies(collective: str, algorithm: str, sizes=range(1, 17)) -> None:
    for p in sizes:
        for spec in specs(collective, algorithm, p):
            verify(build(spec, algorithm))


@pytest.mark.parametrize("collective,algorithm", MENU)
def test_every_schedule_verifies_for_p_1_to_16(collective, algorithm):
    check_verifies(collective, algorithm)


@pytest.mark.parametrize("p", [2, 3, 5, 8, 13, 16])
def test_round_counts_match_the_textbook(p):
    lg = ceil_log2(p)
    rounds = {
        ("all_reduce", "ring"): 2 * (p - 1),
        ("all_gather", "bruck"): lg,
        ("all_gather", "pat"): lg,  # small blocks: one message per distance
        ("reduce_scatter", "pat"): lg,
        ("all_gather", "ring"): p - 1,
        ("broadcast", "binomial"): lg,
        ("barrier", "dissemination"): lg,
        ("reduce_scatter", "pairwise"): p - 1,
        ("all_to_all", "bruck"): lg + 2,  # plus the local rotations in and out
    }
    for (c, a), want in rounds.items():
        rec = record(c)
        spec = rec.with_count(p, 1 if rec.split else 4 * p)  # per pair where split
        assert len(build(spec, a)) == want, (c, a, p)
    pow2 = 1 << (p.bit_length() - 1)
    extra = 2 if pow2 != p else 0  # fold in and fold out
    assert len(build(Spec("all_reduce", p, count=4), "recursive_doubling")) == ceil_log2(pow2) + extra


def test_ring_all_reduce_sends_the_bandwidth_lower_bound():
    p, n = 8, 8 * 1024
    sched = build(Spec("all_reduce", p, count=n), "ring")
    sent = np.zeros(p)
    for r in sched.rounds:
        np.add.at(sent, r.src, r.count)
    assert np.all(sent == 2 * (p - 1) * n // p)


def _all_reduce(rounds, p, n):
    return Schedule("all_reduce", "bug", p, tuple(rounds), {WORK: np.full(p, n)}, {"count": n})


def test_verify_catches_an_off_by_one_ring():
    p, n = 4, 8
    ch, v = split(n, p), np.arange(p)
    rounds = [Round.of(v, (v + 1) % p, *ch[(v - s) % p], reduce=True) for s in range(p - 1)]
    rounds += [Round.of(v, (v + 1) % p, *ch[(v - s) % p]) for s in range(p - 1)]
    with pytest.raises(VerificationError, match="expected element"):
        verify(_all_reduce(rounds, p, n))


def test_verify_catches_a_whole_buffer_ring_counting_ranks_twice():
    p, n, v = 4, 8, np.arange(4)
    rounds = [Round.of(v, (v + 1) % p, 0, n, reduce=True) for _ in range(p - 1)]
    with pytest.raises(VerificationError, match="twice"):
        verify(_all_reduce(rounds, p, n))


def test_verify_catches_writes_past_the_buffer_and_conflicting_writes():
    with pytest.raises(VerificationError, match="outside"):
        verify(_all_reduce([Round.of(0, 1, 6, 4)], 2, 8))
    with pytest.raises(VerificationError, match="same elements"):
        verify(_all_reduce([Round.of([0, 2], [1, 1], 0, 4)], 3, 8))


def test_verify_catches_a_barrier_that_leaves_early():
    b = build(Spec("barrier", 5), "dissemination")
    with pytest.raises(VerificationError, match="before hearing"):
        verify(Schedule("barrier", "short", 5, b.rounds[:-1], b.buffers, {}))


def test_hierarchical_refuses_a_node_size_that_does_not_divide_p():
    with pytest.raises(ValueError, match="local_size=4 must divide the world size 6"):
        build(Spec("all_reduce", 6, count=10, local_size=4), "hierarchical")
