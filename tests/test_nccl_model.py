"""NCCL 2.30.7's cost model (mycollectives.nccl): constants as the source has them, the model's
tables against an independent transliteration's worked example, the search's channels, and the
latency chapters 2 and 4 both use."""

from __future__ import annotations

import pytest

from mycollectives.book.exercises.primitives import LINKS
from mycollectives.nccl import Graph, Hardware, System, bandwidth, choose, latency, system
from mycollectives.nccl import constants as K
from mycollectives.topology import NET, NVLINK, PROTOCOLS

H100 = Hardware("hopper", 8, 18 * 20.6, 8, 50.0, 48.0, nvls=True)
A100 = Hardware("ampere", 8, 12 * 20.0, 8, 25.0, 24.0, nvls=False)


def test_constants_are_tuning_cc_2_30_7():
    assert K.BASE_LATENCY["Ring"] == {"LL": 6.6, "LL128": 14.0, "Simple": 8.4}  # tuning.cc 151
    assert K.BASE_LATENCY["Tree"]["Simple"] == 8.4 and K.BASE_LATENCY["PAT"]["Simple"] == 8.0
    assert K.HW_LATENCY["NVLink"]["Ring"] == {"LL": 0.6, "LL128": 1.9, "Simple": 3.4}  # 159
    assert (
        K.HW_LATENCY["NET"]["NVLSTree"]["Simple"] == 20.9 and K.HW_LATENCY["NVLink"]["NVLS"]["Simple"] == 25
    )
    assert K.LL_MAX_BW["hopper"] == (141.0, 45.0, 35.0) and K.PER_CHANNEL_RING_LL128["hopper"] == 36.7
    assert K.NVLS_EFFICIENCY == {"volta": 0.0, "ampere": 0.0, "hopper": 0.85, "blackwell": 0.74}
    assert K.RING_LL_FACTOR == 0.5 and K.RING_LL_FACTOR_2_19 == {"multi-node, all-reduce or reduce": 0.25,
                                                                "otherwise": 1 / 3}  # fmt: skip
    assert len(K.TREE_CORRECTION["Simple"]) == 24


def test_protocols_and_chapter_2_read_the_same_constants():
    simple = PROTOCOLS["simple"]
    assert simple.base_latency == pytest.approx(K.BASE_LATENCY["Ring"]["Simple"] * 1e-6)
    assert simple.step_latency[NVLINK] == pytest.approx(LINKS["nvlink4"].step)
    assert simple.step_latency[NET] == pytest.approx(LINKS["ndr"].step)
    assert PROTOCOLS["ll"].efficiency == 0.5 and PROTOCOLS["ll128"].efficiency == 0.92


def test_an_8_rank_ring_pays_the_base_latency_once():
    """The issue's numbers: 8.4 + 14 x 3.4 = 56 us by NCCL, not 14 x (8.4 + 3.4) = 165 us."""
    s = system(H100, 8, 1)
    assert latency(s, "all_reduce", "Ring", "Simple") == pytest.approx(56.0)
    assert LINKS["nvlink4"].collective_time(14, 0) == pytest.approx(56e-6)
    assert 14 * LINKS["nvlink4"].alpha == pytest.approx(165.2e-6)


def test_search_finds_nccls_channels():
    one = system(H100, 8, 1)
    assert (one.graphs["ring"].channels, one.graphs["ring"].bw_intra) == (12, 30.0)  # 6 x 60, duplicated
    assert (one.graphs["nvls"].channels, one.graphs["nvls"].bw_intra, one.graphs["nvls"].bw_inter) == (
        8,
        40.0,
        60.0,
    )
    assert one.runtime_channels == 24
    four = system(H100, 32, 4)
    assert (four.graphs["ring"].channels, four.graphs["ring"].bw_inter, four.runtime_channels) == (
        8,
        48.0,
        16,
    )
    assert (
        system(A100, 8, 1).graphs["ring"].channels == 12 and system(A100, 8, 1).graphs["ring"].bw_intra == 20
    )
    a100_4hdr = Hardware("ampere", 8, 240.0, 4, 25.0, 24.0, nvls=False)
    assert system(a100_4hdr, 24, 3).graphs["ring"] == Graph(4, 24.0, 24.0)


def test_model_matches_an_independent_transliteration():
    """latency (us) / algorithm bandwidth (GB/s) on one DGX H100, as printed by the transliteration of
    tuning.cc in the research notes (model.md, section 1.8), for the same graphs."""
    s = system(H100, 8, 1)
    want = {
        ("all_reduce", "Tree"): [(15.2, 43.6), (31.5, 128.8), (64.4, 165.6)],
        ("all_reduce", "Ring"): [(15.0, 80.6), (40.6, 189.3), (56.0, 205.7)],
        ("all_gather", "Ring"): [(10.8, 161.1), (27.3, 378.5), (32.2, 411.4)],
    }
    for (f, a), rows in want.items():
        for p, (lat, bw) in zip(K.PROTOCOLS, rows):
            assert latency(s, f, a, p) == pytest.approx(lat, abs=0.05)
            assert bandwidth(s, f, a, p) == pytest.approx(bw, abs=0.05)
    assert bandwidth(s, "all_reduce", "NVLS", "Simple") == pytest.approx(272.0, abs=0.05)
    assert bandwidth(s, "all_gather", "NVLS", "Simple") == pytest.approx(208.2, abs=0.06)


def test_pat_latency_and_choice_at_64_nodes():
    """64 nodes of one GPU, graphs of 2 channels x 24 GB/s (model.md's second example)."""
    g = Graph(2, 24.0, 24.0, nvlink=False, tree_pattern=True)
    s = System(64, 64, "hopper", {"ring": g, "tree": g}, runtime_channels=4)
    assert latency(s, "all_gather", "PAT", "Simple") == pytest.approx(8 + 6 * 14 / 3.5 + 64 * 2.8)
    assert latency(s, "all_gather", "Ring", "LL") == pytest.approx(6.6 + 63 * 5.0)
    assert latency(s, "all_gather", "Ring", "Simple") == pytest.approx(8.4 + 63 * 14.0)
    assert choose(s, "all_gather", 1 << 20)[0] == "PAT"
    assert choose(s, "all_gather", 1 << 30)[:2] == ("Ring", "Simple")
    assert not system(H100, 16, 2).available("all_gather", "PAT")  # eight GPUs per node: no PAT


def test_choice_by_size_and_the_ll_switch():
    s = system(H100, 8, 1)
    assert choose(s, "all_reduce", 1 << 10)[:2] == ("Ring", "LL")
    assert choose(s, "all_reduce", 64 << 20)[:2] == ("NVLS", "Simple")
    ring = [choose(s, "all_reduce", n, algorithms=["Ring"])[1] for n in (1 << 20, 2 << 20, 4 << 20, 8 << 20)]
    assert ring == ["LL", "LL", "LL128", "LL128"]  # LL gives way to LL128 between 2 and 4 MB, not at 16 MiB
    with pytest.raises(ValueError, match="models"):
        choose(s, "all_to_all", 1 << 20)


def test_ring_plateau_only_for_simple_all_reduce_across_nodes():
    one, two = system(H100, 8, 1), system(H100, 16, 2)
    from mycollectives.nccl import latency_us

    assert latency_us(one, "all_reduce", "Ring", "Simple", 1 << 30) == latency(
        one, "all_reduce", "Ring", "Simple"
    )
    assert latency_us(two, "all_reduce", "Ring", "Simple", 1 << 30) == pytest.approx(
        1.4 * latency(two, "all_reduce", "Ring", "Simple")
    )
    assert latency_us(two, "all_reduce", "Ring", "LL", 1 << 30) == latency(two, "all_reduce", "Ring", "LL")


# --- NCCL's exclusions (enqueue.cc updateCollCostTable, tuning.cc getNetOverhead; NCCL 2.30.7) ------


def test_nccl_exclusions_are_modelled():
    from mycollectives.sim.nccl import choose as sim_choose
    from mycollectives.topology import cluster

    one_gpu = cluster("dgx_h100", 16, gpus_per_node=1)
    assert sim_choose("reduce_scatter", 1 << 20, one_gpu)[0] == "PAT"
    assert "PAT" not in {a for a, _ in sim_choose("reduce_scatter", 1 << 20, one_gpu, op="avg")[2]}
    assert sim_choose("all_gather", 1 << 20, one_gpu, op="avg")[0] == "PAT"  # the rule is reduce-scatter's
    two = cluster("dgx_h100", 2)
    plain, fp8 = (
        sim_choose("all_reduce", 64 << 20, two)[2],
        sim_choose("all_reduce", 64 << 20, two, dtype="fp8_e4m3"),
    )
    assert all(fp8[2][k] == pytest.approx(1024 * plain[k]) for k in plain if k[0] == "Ring")  # 16 ranks > 8
    assert fp8[0] != "Ring"
    one = cluster("dgx_h100", 1)
    assert (
        sim_choose("all_reduce", 64 << 20, one, algorithms=["Ring"], dtype="fp8_e4m3")[0] == "Ring"
    )  # 8 ranks


def test_nvls_gathers_need_at_most_32_local_ranks():
    from mycollectives.nccl import model

    s = model.System(
        64, 1, "blackwell", {"nvls": model.Graph(16, 40.0, 40.0), "ring": model.Graph(16, 40.0, 40.0)}, 32
    )
    assert not s.available("all_gather", "NVLS") and s.available("all_reduce", "NVLS")
    s32 = model.System(32, 1, "blackwell", s.graphs, 32)
    assert s32.available("all_gather", "NVLS")


def test_amd_hosts_pay_twice_the_network_overhead():
    from dataclasses import replace

    from mycollectives.nccl import model

    s = model.System(16, 2, "hopper", {"ring": model.Graph(8, 40.0, 40.0)}, 16)
    intel, amd = (
        model.latency(s, "all_reduce", "Ring", "Simple"),
        model.latency(replace(s, amd_cpu=True), "all_reduce", "Ring", "Simple"),
    )
    assert amd > intel
