"""The simulator: fair sharing, agreement with the cost model, caching, NVLS, validation."""

from __future__ import annotations

import numpy as np
import pytest

from mycollectives.algorithms import Spec, schedule_for, spec_for, uses
from mycollectives.collectives import busbw_factor as bus_factor
from mycollectives.cost import Machine, counted_cost
from mycollectives.sim import (
    Paths,
    crossover,
    drain,
    max_min_rates,
    simulate,
    sweep,
    tune,
)
from mycollectives.topology import cluster, dgx_a100, dgx_h100, pcie_box


def test_max_min_fairness_textbook_case():
    """Flow 0 on link 0, flow 1 on links 0 and 1, flow 2 on link 1; capacities 1 and 2."""
    paths = Paths.of(np.array([0, 1, 1, 2]), np.array([0, 0, 1, 1]), 3)
    rates = max_min_rates(paths, np.array([1.0, 2.0]), np.ones(3, bool))
    assert rates.tolist() == pytest.approx([0.5, 0.5, 1.5])


def test_finished_flows_free_bandwidth():
    paths = Paths.of(np.array([0, 1]), np.array([0, 0]), 2)
    t, finish = drain(paths, np.array([1.0]), np.array([1.0, 3.0]))
    assert finish.tolist() == pytest.approx([2.0, 4.0])  # shared until 2, then alone
    assert t == pytest.approx(4.0)


def test_bus_factors_are_nccl_tests():
    assert bus_factor("all_reduce", 8) == pytest.approx(14 / 8)
    assert bus_factor("all_gather", 8) == pytest.approx(7 / 8)
    assert bus_factor("broadcast", 8) == 1.0


def _usable(topo):
    return topo.link_bw[topo.link_class == 0].min() / 1e9


@pytest.mark.parametrize("topo", [dgx_a100(), dgx_h100()], ids=lambda t: t.name)
def test_large_ring_reaches_link_bandwidth(topo):
    r = simulate("all_reduce", "ring", 8 << 30, topo)
    assert r.busbw == pytest.approx(_usable(topo), rel=0.01)
    assert r.busbw < _usable(topo)
    assert r.algbw == pytest.approx(r.busbw / bus_factor("all_reduce", 8))


@pytest.mark.parametrize(
    "collective,algorithm,p",
    [
        ("all_reduce", "ring", 8),
        ("all_reduce", "ring", 5),
        ("all_reduce", "recursive_doubling", 8),
        ("all_reduce", "rabenseifner", 8),
        ("all_gather", "ring", 6),
        ("all_gather", "bruck", 7),
        ("reduce_scatter", "recursive_halving", 8),
        ("broadcast", "binomial", 8),
    ],
)
def test_ideal_switch_matches_the_beta_term(collective, algorithm, p):
    """On a non-blocking switch with no latency, the simulated time is the cost
    model's bandwidth term with beta = 1 / link bandwidth."""
    topo = dgx_h100()
    nbytes = 4 * 840 * p
    r = simulate(collective, algorithm, nbytes, topo, world_size=p, protocol="ideal")
    beta = 1 / topo.link_bw[0]
    want = counted_cost(schedule_for(collective, algorithm, p, nbytes), Machine(0.0, beta, 0.0))
    assert r.time_s == pytest.approx(want, rel=1e-9)


def test_contention_on_a_shared_link():
    """Two GPUs of one node sending to one other node share a NIC when there is one."""
    one = cluster("dgx_a100", 2, nics_per_node=1)
    eight = cluster("dgx_a100", 2, nics_per_node=8)
    t1 = simulate("all_to_all", "linear", 64 << 20, one, protocol="ideal").time_s
    t8 = simulate("all_to_all", "linear", 64 << 20, eight, protocol="ideal").time_s
    assert t1 > 4 * t8
    r = simulate("all_to_all", "linear", 64 << 20, one)
    assert (r.link_utilisation <= 1 + 1e-9).all()
    assert r.link_utilisation.max() > 0.5


@pytest.mark.parametrize(
    "collective,algorithm,nbytes",
    [
        ("all_reduce", "ring", 12345 * 4),
        ("all_reduce", "double_binary_tree", 1 << 22),
        ("all_reduce", "hierarchical", 3 << 20),
        ("all_gather", "recursive_doubling", 24 * 1000),
        ("all_to_all", "bruck", 24 * 24 * 40),
    ],
)
def test_pattern_cache_gives_the_general_answer(collective, algorithm, nbytes):
    topo = cluster("dgx_a100", 3, nics_per_node=4)
    fast = simulate(collective, algorithm, nbytes, topo)
    slow = simulate(collective, algorithm, nbytes, topo, cache=False)
    assert fast.time_s == pytest.approx(slow.time_s, rel=1e-12)
    assert np.allclose(fast.link_bytes, slow.link_bytes)
    assert np.allclose(fast.round_time, slow.round_time)


def test_link_bytes_add_up():
    """A ring all-reduce sends 2(p-1)/p of the vector up each GPU's NVLink."""
    topo, n = dgx_a100(), 8 << 20
    r = simulate("all_reduce", "ring", n, topo)
    up = topo.kinds
    gpu_up = np.array([up[s] == "gpu" for s in topo.link_src])
    assert r.link_bytes[gpu_up] == pytest.approx(np.full(8, 2 * 7 / 8 * n))
    assert r.round_link_bytes.shape == (14, topo.num_links)
    assert len(r.timeline()) == 14 and r.timeline()[0]["messages"] == 8


def test_protocols_cross_over():
    topo = dgx_h100()
    small = {p: simulate("all_reduce", "ring", 1 << 10, topo, protocol=p).time_s for p in ("ll", "simple")}
    large = {p: simulate("all_reduce", "ring", 1 << 30, topo, protocol=p).time_s for p in ("ll", "simple")}
    assert small["ll"] < small["simple"] and large["simple"] < large["ll"]


def test_nvls_beats_the_ring_on_eight_gpus_and_needs_the_hardware():
    ring = simulate("all_reduce", "ring", 1 << 30, dgx_h100())
    nvls = simulate("all_reduce", "nvls", 1 << 30, dgx_h100(nvls=True))
    assert nvls.busbw > ring.busbw > 0
    with pytest.raises(ValueError, match="in-switch"):
        simulate("all_reduce", "nvls", 1 << 30, dgx_h100(nvls=False))
    with pytest.raises(ValueError, match="'nvls' runs all_reduce, not broadcast"):
        simulate("broadcast", "nvls", 1 << 30, dgx_h100(nvls=True))


def test_the_simulators_menu_is_the_packages_and_the_switchs():
    from mycollectives.algorithms import algorithms as menu
    from mycollectives.collectives import collectives
    from mycollectives.sim import algorithms

    for c in collectives():
        extra = ("nvls",) if c == "all_reduce" else ()
        assert algorithms(c) == menu(c) + extra, c


def test_time_grows_with_size_and_pcie_is_slower():
    ts = [simulate("all_reduce", "ring", n, pcie_box(4)).time_s for n in (1 << 10, 1 << 20, 1 << 30)]
    assert ts == sorted(ts)
    assert (
        simulate("all_reduce", "ring", 1 << 30, pcie_box(5)).busbw
        > simulate("all_reduce", "ring", 1 << 30, pcie_box(4)).busbw
    )


def test_crossover_finds_where_the_second_algorithm_takes_over():
    topo = cluster("dgx_a100", 4)
    res = sweep("all_reduce", ["double_binary_tree", "ring"], topo, [1 << 12, 1 << 20, 1 << 28])
    x = crossover(res, "double_binary_tree", "ring")
    if x is not None:
        i = [r.nbytes for r in res["ring"]].index(x)
        assert all(res["ring"][j].time_s < res["double_binary_tree"][j].time_s for j in range(i, 3))


def test_a_thousand_ranks_simulate():
    r = simulate("all_reduce", "ring", 1 << 28, cluster("dgx_h100", 32))
    assert r.world_size == 256 and len(r.round_time) == 510


def test_world_size_is_checked():
    with pytest.raises(ValueError, match="exceeds"):
        simulate("all_reduce", "ring", 1024, dgx_a100(), world_size=9)
    assert spec_for("all_gather", "ring", 4, 4 * 4 * 10, 4) == Spec("all_gather", 4, count=10)


def test_tuner_picks_among_nccls_algorithms_by_size():
    topo = dgx_h100(nvls=True)
    algo, proto, times = tune("all_reduce", 1 << 10, topo)
    assert (algo, proto) == ("Ring", "LL")
    assert {a for a, _ in times} <= {"Ring", "Tree", "NVLS"}  # NCCL's menu only: no direct, no hierarchical
    algo, proto, _ = tune("all_reduce", 1 << 30, topo)
    assert (algo, proto) == ("NVLS", "Simple")
    assert tune("all_reduce", 1 << 30, topo, algorithms=["ring"])[:2] == ("Ring", "Simple")


@pytest.mark.parametrize("p", [6, 8])
def test_every_algorithm_simulates(p):
    """The whole menu runs on a two-node cluster, its time at least its busiest link's bytes / bandwidth."""
    from mycollectives.algorithms import COLLECTIVES, algorithms

    topo = cluster("dgx_a100", 2, nics_per_node=2)
    for c in COLLECTIVES:
        for a in algorithms(c):
            if "local_size" in uses(c, a) and p % 8:
                continue
            r = simulate(c, a, 3 * 4 * p * p, topo, world_size=p, local_size=4 if p == 8 else None)
            assert r.time_s > 0 and np.isfinite(r.busbw), (c, a)
            floor = (r.link_bytes / topo.link_bw).max()
            assert r.time_s >= floor * (1 - 1e-9), (c, a)
