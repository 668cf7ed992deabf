"""The cost model: counted and closed-form costs agree, bounds hold, calibration fits, auto picks."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import MENU

import mycollectives as mc
from mycollectives import auto
from mycollectives.algorithms import Spec, algorithms, build, uses
from mycollectives.collectives import collectives, record
from mycollectives.cost import (
    FORMULAS,
    UPPER_BOUND,
    Machine,
    cheapest,
    closed_form,
    counted_cost,
    crossover_size,
    fit_alpha_beta,
    predict,
)
from mycollectives.pingpong import calibrate

WITH_FORMULA = [(c, a) for c, a in MENU if (c, a) in FORMULAS]  # a closed form is optional
MACHINE = Machine(alpha=1.0, beta=1e-3, gamma=1e-4)  # every term visible


def _spec(c: str, a: str, p: int, k: int) -> tuple[Spec, int, dict]:
    """A spec of ``p * k`` elements (a vector, a block, or per pair, as its
    record reads a count), the formula's count, and the formula's parameters."""
    opts = {}
    if "local_size" in uses(c, a):
        opts["local_size"] = next((d for d in (4, 3, 2) if p % d == 0), p)
    if "segment" in uses(c, a):
        opts["segment"] = k
    spec = record(c).with_count(p, p * k, **opts)
    return spec, (p * k if spec.splits is not None else spec.count), opts


def check_counted_cost(collective: str, algorithm: str) -> None:
    """Any algorithm, closed form or not: its counted cost is finite, grows with
    the size and costs nothing on one rank."""
    for p in (1, 2, 3, 8):
        costs = [
            counted_cost(build(_spec(collective, algorithm, p, k)[0], algorithm), MACHINE) for k in (1, 7)
        ]
        assert all(math.isfinite(x) and x >= 0 for x in costs), (p, costs)
        assert costs[0] <= costs[1] * (1 + 1e-12), (p, costs)
        assert p > 1 or costs == [0.0, 0.0], costs


@pytest.mark.parametrize("collective,algorithm", MENU)
def test_counted_cost_of_every_algorithm(collective, algorithm):
    check_counted_cost(collective, algorithm)


def check_counted_equals_closed_form(collective: str, algorithm: str) -> None:
    for p in range(2, 65):
        for k in (1, 7):
            spec, n, opts = _spec(collective, algorithm, p, k)
            got = counted_cost(build(spec, algorithm), MACHINE)
            want = closed_form(collective, algorithm, p, n, MACHINE, **opts)
            if (collective, algorithm) in UPPER_BOUND:
                assert got <= want * (1 + 1e-12), (p, k)
            else:
                assert got == pytest.approx(want, rel=1e-12), (p, k)


@pytest.mark.parametrize("collective,algorithm", WITH_FORMULA)
def test_counted_equals_closed_form(collective, algorithm):
    """Where an algorithm has a closed form: for p = 2..64 and two sizes the
    round-by-round count and the formula agree (the double binary tree's
    formula is an upper bound)."""
    check_counted_equals_closed_form(collective, algorithm)


@pytest.mark.parametrize("collective,algorithm", WITH_FORMULA)
def test_closed_form_at_large_and_uneven_sizes(collective, algorithm):
    """Exact at a large size p divides; an upper bound when it does not (the largest
    chunk is rounded up), and still exact in its latency term."""
    for p in (2, 3, 6, 16, 33, 64):
        spec, n, opts = _spec(collective, algorithm, p, 1000)
        want = closed_form(collective, algorithm, p, n, MACHINE, **opts)
        got = counted_cost(build(spec, algorithm), MACHINE)
        assert (
            got <= want * (1 + 1e-12) and (collective, algorithm) in UPPER_BOUND or got == pytest.approx(want)
        )
        n = 7 * p + 3  # not divisible by p
        spec = record(collective).with_count(p, n, **opts)
        if spec.splits is not None or spec.count != n:
            continue  # per-pair sizes, or a count the collective does not read
        assert counted_cost(build(spec, algorithm), MACHINE) <= closed_form(
            collective, algorithm, p, n, MACHINE, **opts
        ) * (1 + 1e-12)
        latency = Machine(1.0, 0.0, 0.0)
        if (collective, algorithm) not in UPPER_BOUND:
            assert counted_cost(build(spec, algorithm), latency) == closed_form(
                collective, algorithm, p, n, latency, **opts
            )


def test_ring_formula_is_the_textbook_one():
    for p in (2, 3, 8, 13):
        n, s = 6 * p, 4
        want = 2 * (p - 1) * 1.0 + 2 * (p - 1) / p * n * s * 1e-3 + (p - 1) / p * n * s * 1e-4
        assert closed_form("all_reduce", "ring", p, n, MACHINE) == pytest.approx(want)


@pytest.mark.parametrize("p", [2, 3, 5, 8, 12, 16])
def test_all_reduce_lower_bounds(p):
    """No all-reduce beats ceil(log2 p) rounds of latency or 2(p-1)/p n bytes per rank."""
    n = 24 * p
    for a in algorithms("all_reduce"):
        opts = {"local_size": 2} if "local_size" in uses("all_reduce", a) else {}
        if opts and p % 2:
            continue
        s = build(Spec("all_reduce", p, count=n, segment=p, **opts), a)
        assert counted_cost(s, Machine(1.0, 0.0, 0.0)) >= math.ceil(math.log2(p)), a
        assert counted_cost(s, Machine(0.0, 1.0, 0.0)) >= 2 * (p - 1) / p * n * 4 - 1e-9, a


def test_local_copies_and_empty_schedules_cost_nothing():
    s = build(Spec("all_to_all", 1, splits=((5,),)), "pairwise")
    assert counted_cost(s, MACHINE) == 0.0
    assert closed_form("all_reduce", "ring", 4, 0, MACHINE) == 0.0


def test_fit_recovers_known_parameters():
    sizes = np.array([4 << k for k in range(0, 22, 2)])
    rng = np.random.default_rng(0)
    times = (3e-6 + 2e-10 * sizes) * (1 + 0.01 * rng.standard_normal(len(sizes)))
    alpha, beta, r2, err = fit_alpha_beta(sizes, times)
    assert alpha == pytest.approx(3e-6, rel=0.05)
    assert beta == pytest.approx(2e-10, rel=0.05)
    assert r2 > 0.99 and err < 0.05


def test_calibrate_on_a_local_world_agrees_on_every_rank():
    res = mc.run_local(lambda rank: calibrate(sizes=[4, 4096, 1 << 18], reps=2), 3)
    m = res[0].machine
    assert all(r.machine == m for r in res)
    assert m.alpha >= 0 and m.beta >= 0 and m.gamma > 0
    assert len(res[0].times) == 3 and np.isfinite(res[0].r2)
    assert "R^2" in res[0].report() and len(res[0].report().splitlines()) == 3 + 3


def test_calibrate_needs_two_ranks():
    with pytest.raises(ValueError, match="at least 2"):
        mc.run_local(lambda rank: calibrate(), 1)


@pytest.mark.parametrize("collective", collectives())
def test_auto_choice_is_on_the_menu_and_deterministic(collective):
    for p in (1, 2, 3, 7, 8, 64, 100):
        for nbytes in (0, 8, 4096, 1 << 20, 1 << 28):
            name = auto.choose(collective, p, nbytes)
            assert name in algorithms(collective)
            assert name != "hierarchical"
            assert auto.choose(collective, p, nbytes) == name


def test_auto_follows_the_model():
    small, large = auto.choose("all_reduce", 64, 64), auto.choose("all_reduce", 64, 1 << 28)
    times = predict("all_reduce", 64, 64)
    assert times[small] == min(times.values())
    assert small in ("recursive_doubling", "reduce_broadcast")
    assert large in ("ring", "rabenseifner")  # the bandwidth-optimal ones
    slow_links = Machine(alpha=1e-9, beta=1e-6, gamma=0)
    assert cheapest("all_reduce", 64, 1 << 10, slow_links) in ("ring", "rabenseifner")


def test_hierarchical_only_with_a_node_size():
    assert "hierarchical" not in predict("all_reduce", 16, 1 << 20)
    assert "hierarchical" in predict("all_reduce", 16, 1 << 20, local_size=4)
    assert "hierarchical" not in predict("all_reduce", 15, 1 << 20, local_size=4)


def test_auto_runs_through_the_api():
    def fn(rank):
        import torch

        t = torch.full((1000,), float(rank))
        mc.all_reduce(t)
        return t[0].item()

    assert mc.run_local(fn, 5) == [10.0] * 5


def test_auto_ranks_the_menu_once_per_call_shape(monkeypatch):
    """The ranking is cached: repeated calls of one shape pay for it once."""
    import mycollectives.auto as auto_mod

    calls = []
    real = auto_mod.cheapest
    monkeypatch.setattr(auto_mod, "cheapest", lambda *a, **k: calls.append(a) or real(*a, **k))
    auto_mod.choose.cache_clear()

    def fn(rank):
        import torch

        t = torch.ones(12345)
        for _ in range(5):
            mc.all_reduce(t)
        return t[0].item()

    assert mc.run_local(fn, 3) == [3.0**5] * 3
    # 15 calls on 3 ranks: ranked once (ranks that race on the first call may each rank it)
    assert 1 <= len(calls) <= 3 and {c[:3] for c in calls} == {("all_reduce", 3, 12345 * 4)}
    auto_mod.choose.cache_clear()


def test_crossover_size_solves_the_two_formulas():
    """Recursive doubling vs ring on 8 ranks: 3(a + n(b+g)) = 14a + 7/8 n (2b + g)."""
    m = Machine(alpha=5e-6, beta=1e-10, gamma=5e-11)
    exact = 11 * m.alpha / (3 * (m.beta + m.gamma) - 7 / 8 * (2 * m.beta + m.gamma))
    x = crossover_size("all_reduce", "recursive_doubling", "ring", 8, m)
    assert x == pytest.approx(exact, abs=64)
    assert crossover_size("all_reduce", "reduce_broadcast", "recursive_doubling", 8, m) == 4  # always
    assert crossover_size("all_reduce", "ring", "recursive_doubling", 8, m) is None  # never for large
