"""PAT and the two-level all-gather and reduce-scatter: the schedules say what the paper,
NCCL's schedule classes and chapter 4 say they do."""

from __future__ import annotations

import numpy as np
import pytest

from mycollectives.algorithms import Spec, build, schedule_for
from mycollectives.algorithms.pat import aggregation
from mycollectives.cost import traffic
from mycollectives.schedule import ceil_log2
from mycollectives.topology.fat_tree import one_gpu_per_node


def messages(schedule, rank: int = 0) -> list[tuple[int, list[int]]]:
    """Rank ``rank``'s messages in order: (distance forward to the receiver, block offsets from the sender)."""
    p, out = schedule.world_size, []
    for r in schedule.rounds:
        mine = r.src == rank
        dsts = set(r.dst[mine].tolist())
        assert len(dsts) <= 1, "PAT sends one message per rank per round"
        if dsts:
            n = schedule.params["count"]
            out.append(((dsts.pop() - rank) % p, sorted(((r.soff[mine] // n - rank) % p).tolist())))
    return out


def test_all_gather_messages_are_those_of_nccls_schedule_class():
    """PatAGAlgorithm's output for 16 ranks, rank 0 (NCCL 2.30.7, src/include/collectives.h):
    fully aggregated one message per distance, far to near; two blocks per message: 8 messages."""
    n = 10
    full = messages(build(Spec("all_gather", 16, count=n, segment=100 * n), "pat"))
    assert full == [(8, [0]), (12, [0, 8]), (14, [0, 4, 8, 12]), (15, [0, 2, 4, 6, 8, 10, 12, 14])]
    two = messages(build(Spec("all_gather", 16, count=n, segment=2 * n), "pat"))
    assert aggregation(16, n, 2 * n) == 2
    assert two == [
        (8, [0]), (12, [0, 8]), (14, [0, 4]), (14, [8, 12]),
        (15, [0, 2]), (15, [4, 6]), (15, [8, 10]), (15, [12, 14]),
    ]  # fmt: skip


def test_reduce_scatter_sends_each_offset_once_on_its_lowest_bit():
    """PatRSAlgorithm: the partial for block r+u goes to r + lowbit(u), near to far; with two
    blocks per message, 16 ranks: 4, 2, 1 and 1 messages at distances 1, 2, 4, 8."""
    for p in range(2, 41):
        sched = build(Spec("reduce_scatter", p, count=3, segment=3 * p), "pat")
        sent = messages(sched)
        distances = [d for d, _ in sent]
        assert distances == sorted(distances), p  # near to far
        for d, blocks in sent:
            for o in blocks:
                assert o & -o == d, (p, d, o)  # block at offset o goes to the rank lowbit(o) ahead
        assert sorted(o for _, b in sent for o in b) == list(range(1, p)), p
    sent = messages(build(Spec("reduce_scatter", 16, count=10, segment=20), "pat"))
    assert [d for d, _ in sent] == [1, 1, 1, 1, 2, 2, 4, 8]


@pytest.mark.parametrize("p", [2, 3, 5, 8, 12, 13, 16, 33, 64])
def test_rounds_go_from_bruck_count_to_ring_count_as_blocks_outgrow_the_slot(p):
    slot = 1024
    for c in ("all_gather", "reduce_scatter"):
        small = build(Spec(c, p, count=1, segment=slot), "pat")
        large = build(Spec(c, p, count=slot, segment=slot), "pat")
        assert len(small) == ceil_log2(p) and len(large) == p - 1, c
        for s in (small, large):
            sent, received = traffic(s, itemsize=1)
            assert (sent == (p - 1) * s.params["count"]).all() and (received == sent).all()
            biggest = max(int(np.bincount(r.src, weights=r.count).max()) for r in s.rounds)
            assert biggest <= max(slot, s.params["count"])  # a message never outgrows its slot


def test_bruck_sends_half_the_data_to_the_farthest_rank_and_pat_to_its_neighbour():
    p = 16
    for name, hop in (("bruck", p // 2), ("pat", 1)):
        last = build(Spec("all_gather", p, count=1), name).rounds[-1]
        zero = last.src == 0
        distance = {min((d - 0) % p, (0 - d) % p) for d in last.dst[zero].tolist()}
        assert distance == {hop} and last.count[zero].sum() == p // 2, name


@pytest.mark.parametrize("p,local", [(8, 2), (12, 3), (12, 4), (16, 8), (6, 1), (5, 5)])
def test_two_level_sends_nodes_minus_one_blocks_over_the_network(p, local):
    nodes, n = p // local, 7
    for c in ("all_gather", "reduce_scatter"):
        s = build(Spec(c, p, count=n, local_size=local), "hierarchical")
        assert len(s) == (local - 1) + (nodes - 1)
        net, _ = traffic(s, itemsize=1, local_size=local)
        assert (net == (nodes - 1) * n).all(), c
        everything, _ = traffic(s, itemsize=1)
        assert (everything == (p - 1) * n).all(), c
        flat, _ = traffic(build(Spec(c, p, count=n), "ring"), itemsize=1, local_size=local)
        assert flat.max() == (p - 1) * n * (nodes > 1)


def test_two_level_refuses_a_node_size_that_does_not_divide_the_world():
    with pytest.raises(
        ValueError, match="hierarchical reduce_scatter: local_size=4 must divide the world size 6"
    ):
        schedule_for("reduce_scatter", "hierarchical", 6, 6 * 64, local_size=4)
    with pytest.raises(ValueError, match="hierarchical all_gather: local_size=4"):
        schedule_for("all_gather", "hierarchical", 6, 6 * 64, local_size=4)


def test_one_gpu_per_node_routes_near_ranks_through_a_leaf_and_far_ones_through_the_spine():
    t = one_gpu_per_node(20, nodes_per_leaf=8, oversubscription=4)
    assert t.num_gpus == 20 and t.gpus_per_node == 1
    assert "spine" not in t.path(0, 7) and "spine" in t.path(7, 8) and "leaf2" in t.path(0, 19)
    spine_links = [k for k in range(t.num_links) if t.kinds[t.link_dst[k]] == "spine"]
    nic = t.link_bw[[k for k in range(t.num_links) if t.kinds[t.link_src[k]] == "nic"][0]]
    assert sorted(t.link_bw[spine_links] / nic) == [1.0, 2.0, 2.0]  # 4, 8 and 8 nodes below, 4:1
    with pytest.raises(ValueError, match="nic must be one of"):
        one_gpu_per_node(4, nic="xdr2")
    with pytest.raises(ValueError, match="oversubscription.*got 0"):
        one_gpu_per_node(4, oversubscription=0)
