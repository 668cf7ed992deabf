"""The channel simulator of NCCL's algorithms: link loads that add up to what each algorithm must
move, rails kept, the bottlenecks a hand count predicts, and clear errors."""

from __future__ import annotations

import numpy as np
import pytest

from mycollectives.sim import simulate_nccl, tune
from mycollectives.sim.channels import dtree
from mycollectives.sim.nccl import link_loads, traffic
from mycollectives.topology import cluster, dgx_a100, dgx_b200, dgx_h100

GIB = 1 << 30
BIG = 64 * GIB  # large enough that latency is below 0.1 %


def _rate(r):
    return r.nbytes / (r.time_s - r.latency_s)


def _spine(topo, r):
    return sum(r.link_bytes[k] for k in range(topo.num_links) if topo.kinds[topo.link_dst[k]] == "spine")


def test_ring_inside_a_node_runs_at_the_nvlink_rate_nccl_achieves():
    """A100: the topology's 12 x 20.0 GB/s; H100 and B200: NCCL's achievable 360 and 720 GB/s
    (sym_kernels.cc), below the topology's 18 x 20.6 and 18 x 40.1."""
    for topo, rate in ((dgx_a100(), 240.0), (dgx_h100(), 360.0), (dgx_b200(), 720.0)):
        r = simulate_nccl("all_reduce", "Ring", BIG, topo)
        assert r.busbw == pytest.approx(rate, rel=1e-3)
        assert r.busbw <= topo.link_bw[0] / 1e9 * (1 + 1e-3)
        assert r.bound_busbw == pytest.approx(topo.link_raw_bw[0] / 1e9)


def test_nvls_bytes_per_gpu_are_n_times_one_plus_one_over_p():
    topo = dgx_h100(nvls=True)
    for p in (5, 8):
        r = simulate_nccl("all_reduce", "NVLS", BIG, topo, world_size=p)
        assert _rate(r) == pytest.approx(360e9 * 0.85 * p / (p + 1), rel=1e-3)  # the fill: 0.05 %


def test_nvls_pipeline_fill_costs_two_loops():
    """16 channels x 8 heads x 128 KiB = 16 MiB a loop; filling and draining three stages costs two
    loops' time: about 2 % at 1 GiB, nothing that matters at 64 GiB (nccl-tests issue 212: 256 MiB
    is too small to reach NVLS's peak)."""
    topo = dgx_h100(nvls=True)
    peak = 360e9 * 0.85 * 8 / 9
    r = simulate_nccl("all_reduce", "NVLS", 1 << 30, topo)
    assert (r.time_s - r.latency_s) == pytest.approx((1 << 30) / peak + 2 * (16 << 20) / peak, rel=1e-9)
    small = simulate_nccl("all_reduce", "NVLS", 256 << 20, topo)
    assert small.busbw < 0.95 * simulate_nccl("all_reduce", "NVLS", BIG, topo).busbw


def test_multi_node_ring_is_bound_by_nvlink_or_the_nics_and_stays_on_its_rail():
    h = cluster("dgx_h100", 4)
    r = simulate_nccl("all_reduce", "Ring", BIG, h)
    assert r.busbw == pytest.approx(360.0, rel=2e-3) and _spine(h, r) == 0
    a = cluster("dgx_a100", 3, nics_per_node=4, nic="hdr")
    r = simulate_nccl("all_reduce", "Ring", BIG, a)
    assert r.busbw == pytest.approx(4 * 24.0, rel=2e-3)  # four 200 Gb/s NICs at 96 %
    fat = cluster("dgx_h100", 4, fabric="fat_tree", nodes_per_leaf=2)
    assert _spine(fat, simulate_nccl("all_reduce", "Ring", GIB, fat)) > 0


def test_every_rank_sends_what_the_collective_needs():
    """Bytes out of each GPU, summed over its NVLink and PCIe links, are at least the lower bound."""
    topo = cluster("dgx_h100", 2)
    gpu_out = np.array([topo.kinds[s] == "gpu" for s in topo.link_src])
    for c, a, need in (
        ("all_reduce", "Ring", 2 * 15 / 16),
        ("all_gather", "Ring", 15 / 16),
        ("all_reduce", "Tree", 1),
    ):
        hop, switch = link_loads(topo, traffic(c, a, topo))
        per_gpu = np.bincount(topo.link_src[gpu_out], weights=(hop + switch)[gpu_out], minlength=16)
        assert per_gpu.min() >= need - 1e-9, (c, a)


def test_double_binary_tree_is_nccls():
    first, second = dtree(12)
    assert first[:5].tolist() == [-1, 2, 4, 2, 8] and first[8] == 0  # trees.cc's picture: 0---8 at the top
    assert second[11] == -1 and second[3] == 11  # the mirror: 11 is the root, 3 hangs from it
    shifted = dtree(13)[1]
    assert shifted[1] == -1 and shifted[9] == 1  # odd: the first tree shifted by one rank
    for t in (*dtree(12), *dtree(13)):
        assert (t < 0).sum() == 1


def test_gb200_tree_across_three_partitions_matches_the_hand_count():
    """Three nodes: per pair of channels a node sends 1 (leaf) + 2 (middle) channel shares: 1.5 S per
    node over its NICs, so algbw = NICs x 48 GB/s / 1.5 (the chain's fill is under 0.5 % at 64 GiB)."""
    for gpus in (4, 8):
        topo = cluster("gb200_nvl72", 3, gpus_per_node=gpus, nvls=False)
        assert _rate(simulate_nccl("all_reduce", "Tree", BIG, topo)) == pytest.approx(
            gpus * 48e9 / 1.5, rel=5e-3
        )


def test_nvls_tree_is_bound_by_its_kernel_not_by_the_links():
    """NVLSTree's channels split their warps between the switch and the network (all_reduce.h), so
    each channel moves at most perChMaxNVLSTreeBws (57.7 GB/s of busbw on two Hopper nodes, 45.5 on
    four or more): below what NVLS (360 x 0.85 x 8/9) or the NICs (4 x 48) would allow. The
    pipeline's fill is under 0.1 % at 64 GiB."""
    two, four = cluster("dgx_h100", 2), cluster("dgx_h100", 4)
    links_two, links_four = 360e9 * 0.85 * 8 / 9, 48e9 * 4
    kernel_two, kernel_four = 8 * 57.7e9 * 16 / 30, 8 * 45.5e9 * 32 / 62  # channels x cap x p / 2(p-1)
    assert kernel_two < links_two and kernel_four < links_four
    assert _rate(simulate_nccl("all_reduce", "NVLSTree", BIG, two)) == pytest.approx(kernel_two, rel=1e-3)
    assert _rate(simulate_nccl("all_reduce", "NVLSTree", BIG, four)) == pytest.approx(kernel_four, rel=1e-3)


def test_pat_and_all_to_all():
    one_gpu = cluster("dgx_h100", 16, gpus_per_node=1)
    r = simulate_nccl("all_gather", "PAT", BIG, one_gpu)
    assert r.busbw == pytest.approx(48.0, rel=2e-3)  # every rank sends (p-1)/p of the gather through its NIC
    assert tune("all_gather", 1 << 20, one_gpu)[0] == "PAT"
    a2a = simulate_nccl("all_to_all", "P2P", BIG, cluster("dgx_a100", 2, nics_per_node=4, nic="hdr"))
    assert a2a.busbw == pytest.approx(24.0 * 15 / 16, rel=2e-3)  # two GPUs share each 200 Gb/s NIC


def test_collnet_needs_sharp_and_the_bound_is_above_the_prediction():
    topo = cluster("dgx_h100", 8, sharp=True)
    for a in ("CollNetChain", "CollNetDirect"):
        r = simulate_nccl("all_reduce", a, 8 * GIB, topo)
        assert 0 < r.busbw <= r.bound_busbw
    assert "CollNetChain" not in {a for a, _ in tune("all_reduce", GIB, cluster("dgx_h100", 8))[2]}


def test_bad_calls_say_what_is_wrong():
    with pytest.raises(ValueError, match="Simple protocol only"):
        simulate_nccl("all_reduce", "NVLS", GIB, dgx_h100(nvls=True), protocol="LL")
    with pytest.raises(ValueError, match="unknown NCCL algorithm"):
        simulate_nccl("all_reduce", "bruck", GIB, dgx_h100())
    with pytest.raises(ValueError, match="world_size=12"):
        simulate_nccl("all_reduce", "Ring", GIB, cluster("dgx_h100", 2), world_size=12)
    with pytest.raises(ValueError, match="does not run"):
        simulate_nccl("all_reduce", "NVLSTree", GIB, dgx_h100(nvls=True))
    with pytest.raises(ValueError, match="node preset"):
        from mycollectives.topology import pcie_box

        simulate_nccl("all_reduce", "Ring", GIB, pcie_box())


def test_thousands_of_nodes_simulate():
    """4096 DGX H100s (32,768 ranks); the timing lives in benchmarks/sim_scale.py."""
    topo = cluster("dgx_h100", 4096)
    r = simulate_nccl("all_reduce", "NVLSTree", GIB, topo)
    assert r.world_size == 32768 and 300 < r.busbw < 380


def test_pipelines_pay_their_fill_and_rings_do_not():
    """A chain or a tree moves a loop (channels x heads x chunk) through its stages before the last
    stage works: (stages - 1) loops' time on top of bytes / rate; a ring has every link busy from its
    first step. CollNetChain on 8 x 8 H100s: 16 channels, 256 KiB chunks halved below 8 x 64 chunks a
    channel (calcCollChunking), 15 stages up and down the chain; NVLSTree on two nodes: 16 channels
    x 8 heads x 128 KiB through scatter, switch and gather."""
    chain, pair = cluster("dgx_h100", 8, sharp=True), cluster("dgx_h100", 2)
    for topo, a, size, loop, stages in (
        (chain, "CollNetChain", 512 << 20, 16 * (128 << 10), 15),
        (chain, "CollNetChain", 8 * GIB, 16 * (256 << 10), 15),
        (pair, "NVLSTree", 4 * 10**9, 16 * 8 * (128 << 10), 3),
    ):
        r = simulate_nccl("all_reduce", a, size, topo)
        rate = _rate(simulate_nccl("all_reduce", a, BIG, topo))
        assert r.time_s - r.latency_s == pytest.approx(size / rate + (stages - 1) * loop / rate, rel=2e-3), a
    ring = simulate_nccl("all_reduce", "Ring", GIB, pair)
    assert _rate(ring) == pytest.approx(_rate(simulate_nccl("all_reduce", "Ring", BIG, pair)), rel=1e-9)
