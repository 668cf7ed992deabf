"""The virtual network's fast paths give what they stand for: its plain-Python max-min sharing NumPy's
rates float for float, and its routes, kept leg by leg, ``Topology.route``'s links."""

from __future__ import annotations

import numpy as np
import pytest

from mycollectives.sim.engine import LinkModel
from mycollectives.sim.fluid import Paths, max_min_rates
from mycollectives.virtual.fairshare import fair_rates
from mycollectives.virtual.network import Network
from mycollectives.virtual.runner import topology_of


def _numpy(routes: list[list[int]], cap: dict[int, float]) -> list[float]:
    flow = np.repeat(np.arange(len(routes)), [len(r) for r in routes])
    link = np.array([x for r in routes for x in r], np.int64)
    paths = Paths.of(flow, link, len(routes))
    caps = np.array([cap[x] for x in paths.links.tolist()])
    return max_min_rates(paths, caps, np.ones(len(routes), bool)).tolist()


@pytest.mark.parametrize("seed", range(40))
def test_same_rates_as_numpy(seed: int) -> None:
    rng = np.random.default_rng(seed)
    links = int(rng.integers(1, 40))
    # capacities from a few classes (ties, as NVLink and NICs give) and some arbitrary ones
    cap = {x: float(rng.choice([25e9, 50e9, 450e9, rng.uniform(1e9, 5e11)])) for x in range(links)}
    routes = [
        rng.choice(
            links, size=int(rng.integers(1, min(links, 6) + 1)), replace=bool(rng.integers(2))
        ).tolist()
        for _ in range(int(rng.integers(1, 120)))
    ]
    got, want = fair_rates(routes, cap), _numpy(routes, cap)
    assert [x.hex() for x in got] == [x.hex() for x in want]


def test_a_shared_link_is_split_and_the_rest_goes_to_the_free_flow() -> None:
    cap = {0: 100.0, 1: 30.0, 2: 100.0}
    assert fair_rates([[0, 1], [0, 2], [2]], cap) == [30.0, 50.0, 50.0]


def test_routes_are_the_topologys() -> None:
    topo = topology_of("dgx_h100", 2, None)
    net = Network(LinkModel(topo))
    for src in range(topo.num_gpus):
        for dst in range(topo.num_gpus):
            for rail in (-1, 0, 5, 11):
                want = topo.route([src], [dst], None if rail < 0 else [rail])[1]
                assert net.links(src, dst, rail).tolist() == want.tolist(), (src, dst, rail)


@pytest.mark.parametrize("proto", ["simple", "ll", "ll128"])
def test_path_latency_is_the_rounds(proto: str) -> None:
    topo = topology_of("dgx_h100", 2, None)
    model = LinkModel(topo, proto)
    for src in range(topo.num_gpus):
        for dst in range(topo.num_gpus):
            for rail in (None, [0], [7]):
                _, links = topo.route([src], [dst], rail)
                want = model.latency(np.zeros(len(links), np.int64), links, 1)
                assert model.path_latency(links).hex() == want.hex(), (src, dst, rail)
