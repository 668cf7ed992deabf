"""Adding an algorithm is one builder: the recipe of the appendix, held to its word.

A toy algorithm, registered by a fixture and by nothing else, must be
verified, executed on a local world and on gloo processes, costed, picked by
``auto``, simulated, drawn and benchmarked, with no other edit anywhere.
The toy is the one-shot all-reduce: every rank sends its whole vector to
every other rank in one round, and each adds up what it receives.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import mycollectives as mc
from mycollectives import auto
from mycollectives.algorithms import Spec, algorithms, build, register, schedule_for, unregister
from mycollectives.cost import Machine, closed_form, counted_cost, predict
from mycollectives.schedule import Round

TOY = "toy_one_shot"


def one_shot(spec: Spec) -> list[Round]:
    """Every rank sends its whole vector to every other rank, which adds it in."""
    p = spec.world_size
    src, dst = np.divmod(np.arange(p * p), p)
    keep = src != dst
    return [Round.of(src[keep], dst[keep], 0, spec.count, reduce=True)]


def ensure_registered() -> None:
    """Register the toy if this process has not (the fixture, or a spawned rank)."""
    if TOY not in algorithms("all_reduce"):
        register("all_reduce", TOY)(one_shot)


@pytest.fixture
def toy():
    ensure_registered()
    auto.choose.cache_clear()
    yield TOY
    unregister("all_reduce", TOY)
    auto.choose.cache_clear()


def test_the_toy_is_verified_for_p_1_to_16(toy):
    for p in range(1, 17):
        for n in (0, 1, p + 3):
            mc.verify(build(Spec("all_reduce", p, count=n), toy))


def test_the_toy_runs_on_a_local_world(toy):
    def fn(rank):
        t = torch.arange(5.0) + rank
        mc.all_reduce(t, algorithm=toy)
        return t.tolist()

    assert mc.run_local(fn, 3) == [[3.0, 6.0, 9.0, 12.0, 15.0]] * 3


def gloo_task(rank: int) -> bool:
    """On a spawned gloo rank: the toy against torch.distributed's all-reduce."""
    import torch.distributed as dist

    ensure_registered()
    x = torch.arange(7.0) * (rank + 1)
    want = x.clone()
    dist.all_reduce(want)
    mc.all_reduce(x, algorithm=TOY)
    return bool(torch.equal(x, want))


@pytest.mark.multiprocess
@pytest.mark.timeout(180)
def test_the_toy_runs_on_gloo(toy):
    assert mc.run_gloo(gloo_task, 3, timeout=120) == [True] * 3


def test_the_toy_is_costed_from_its_schedule_without_a_formula(toy):
    m = Machine(alpha=1.0, beta=1e-3, gamma=1e-4)
    p, n = 4, 1000
    # one round: each rank sends and receives p-1 whole vectors and adds p-1 of them
    want = (p - 1) * (m.alpha + 4 * n * m.beta + 4 * n * m.gamma)
    assert counted_cost(build(Spec("all_reduce", p, count=n), toy), m) == pytest.approx(want)
    with pytest.raises(KeyError):
        closed_form("all_reduce", toy, p, n, m)  # no formula: auto does not need one
    assert toy in predict("all_reduce", p, 4 * n, m)


def test_auto_picks_the_toy_where_it_is_cheapest(toy):
    # three ranks, a small vector: one round of two messages, where recursive
    # doubling folds the third rank in and out (three rounds)
    assert auto.choose("all_reduce", 3, 64) == toy
    assert auto.choose("all_reduce", 3, 64 << 20) != toy  # large: it moves (p-1) vectors per rank
    world = mc.LocalWorld(3)
    world.run(lambda rank: mc.all_reduce(torch.ones(16)))
    assert {e.algorithm for e in world.trace if e.collective == "all_reduce"} == {toy}


def test_the_toy_is_simulated_and_drawn(toy):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    from mycollectives import viz
    from mycollectives.sim import simulate
    from mycollectives.topology import dgx_h100

    r = simulate("all_reduce", toy, 1 << 20, dgx_h100())
    assert r.time_s > 0 and len(r.round_time) == 1
    sched = schedule_for("all_reduce", toy, 4, 1 << 10)
    viz.draw_buffers(sched)
    assert "<" in viz.to_html(viz.animate(sched))


def bench_task(rank: int) -> list:
    """On a spawned gloo rank: the bench's sweep with the toy and the native all-reduce."""
    from mycollectives.bench.runner import run_sweep

    ensure_registered()
    results = run_sweep("all_reduce", [1024, 65536], [TOY, "native"], iters=2, warmup=1, reps=2)
    return [(r.algorithm, r.size, r.wrong, r.time_us > 0) for r in results]


@pytest.mark.multiprocess
@pytest.mark.timeout(180)
def test_the_toy_is_benchmarked(toy):
    rows = mc.run_gloo(bench_task, 2, timeout=120)[0]
    assert {(a, n) for a, n, _, _ in rows} == {(a, n) for a in (TOY, "native") for n in (1024, 65536)}
    assert all(wrong == 0 and timed for _, _, wrong, timed in rows)
