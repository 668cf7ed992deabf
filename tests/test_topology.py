"""Topologies: routes exist and follow the expected links; presets carry their figures."""

from __future__ import annotations

import numpy as np
import pytest

from mycollectives.topology import (
    NET,
    NVLINK,
    PRESETS,
    PROTOCOLS,
    cluster,
    dgx_a100,
    dgx_h100,
    nvlink_bridge_pair,
    pcie_box,
    preset,
    protocol,
)

ALL = [preset(name) for name in PRESETS] + [
    cluster("dgx_a100", 3, nics_per_node=4, fabric="rail"),
    cluster("dgx_h100", 5, nics_per_node=8, fabric="fat_tree", nodes_per_leaf=2),
    cluster("dgx_h100", 2, nics_per_node=1, nic="hdr"),
]


@pytest.mark.parametrize("topo", ALL, ids=lambda t: t.name)
def test_every_pair_has_a_route_that_is_a_path(topo):
    g = np.arange(topo.num_gpus)
    src, dst = (a.ravel() for a in np.meshgrid(g, g, indexing="ij"))
    flow, link = topo.route(src, dst)
    assert not np.isin(flow, np.flatnonzero(src == dst)).any()  # no links for self-transfers
    for f in range(len(src)):
        if src[f] == dst[f]:
            continue
        mine = link[flow == f]
        tails, heads = topo.link_src[mine], topo.link_dst[mine]
        # a path: every vertex entered is left again, except the destination
        assert sorted(tails.tolist() + [dst[f]]) == sorted(heads.tolist() + [src[f]])
    assert (topo.link_bw <= topo.link_raw_bw).all() and (topo.link_bw > 0).all()


def test_links_come_in_pairs_one_per_direction():
    t = cluster("dgx_a100", 2)
    assert (t.link_src[0::2] == t.link_dst[1::2]).all()
    assert (t.link_bw[0::2] == t.link_bw[1::2]).all()


def test_intra_node_traffic_stays_on_nvlink():
    t = cluster("dgx_h100", 4)
    _, link = t.route([0, 9], [7, 14])
    assert (t.link_class[link] == NVLINK).all()
    _, link = t.route([0], [8])
    assert (t.link_class[link] == NET).any()


def test_rail_and_fat_tree_routes():
    rail = cluster("dgx_a100", 4, fabric="rail")
    assert "spine" not in rail.path(0, 8)  # same rail: one leaf
    assert "spine" in rail.path(0, 9)  # different rails
    tree = cluster("dgx_a100", 4, fabric="fat_tree", nodes_per_leaf=2)
    assert "spine" not in tree.path(0, 9)  # nodes 0 and 1 share a leaf
    assert "spine" in tree.path(0, 17)


def test_nics_are_shared_by_gpus_in_order():
    t = cluster("dgx_a100", 2, nics_per_node=2)
    assert t.path(0, 8)[1] == t.path(3, 8)[1] == "n0.nic0"
    assert t.path(4, 8)[1] == "n0.nic1"


def test_vectorised_route_matches_one_at_a_time():
    t = cluster("dgx_h100", 3, nics_per_node=4)
    rng = np.random.default_rng(1)
    src, dst = rng.integers(0, 24, 50), rng.integers(0, 24, 50)
    flow, link = t.route(src, dst)
    for i in range(50):
        _, one = t.route([src[i]], [dst[i]])
        assert sorted(one.tolist()) == sorted(link[flow == i].tolist())


def test_preset_figures_follow_their_sources():
    gbs = 1e9
    assert dgx_a100().link_raw_bw.max() == pytest.approx(300 * gbs)  # 12 x 25 GB/s
    assert dgx_h100().link_raw_bw.max() == pytest.approx(450 * gbs)  # 18 x 25 GB/s
    assert dgx_h100().link_bw.max() == pytest.approx(18 * 20.6 * gbs)
    assert pcie_box(5).link_raw_bw.max() == pytest.approx(2 * pcie_box(4).link_raw_bw.max())
    assert dgx_h100(nvls=True).in_switch_reduction > 0 and not dgx_h100().in_switch_reduction
    assert nvlink_bridge_pair().path(0, 1) == ["gpu0", "nvlink-bridge", "gpu1"]
    assert all(t.sources for t in ALL)


def test_protocols_trade_latency_for_bandwidth():
    ll, ll128, simple = (PROTOCOLS[k] for k in ("ll", "ll128", "simple"))
    assert ll.efficiency < ll128.efficiency < simple.efficiency
    for cls in (NVLINK, NET):
        assert ll.round_latency(cls) < ll128.round_latency(cls) < simple.round_latency(cls)
    with pytest.raises(ValueError):
        protocol("fast")


def test_bad_presets_are_refused():
    with pytest.raises(ValueError):
        cluster("dgx_z100")
    with pytest.raises(ValueError):
        preset("nope")
