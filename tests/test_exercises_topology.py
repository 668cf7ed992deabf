"""Chapter 4's exercise checks: right answers pass, wrong ones fail with a message that helps."""

from __future__ import annotations

import pytest
import torch

import mycollectives as mc
from mycollectives.exercises import ExerciseFailure
from mycollectives.exercises import topology as ex
from mycollectives.nccl import constants as K
from mycollectives.topology import NET, NVLINK, cluster

GIB = 1 << 30


# --- hierarchical all-reduce ---------------------------------------------------------


def leader_all_reduce(tensor: torch.Tensor, local_size: int) -> None:
    """The notebook's solution: reduce to the node leader, leaders all-reduce, broadcast."""
    rank, p = mc.get_rank(), mc.get_world_size()
    leader = rank - rank % local_size
    members = range(leader + 1, leader + local_size)
    if rank != leader:
        mc.send(tensor, leader)
        mc.recv(tensor, leader)
        return
    tmp = torch.empty_like(tensor)
    for r in members:
        mc.recv(tmp, r)
        tensor += tmp
    if leader == 0:
        for other in range(local_size, p, local_size):
            mc.recv(tmp, other)
            tensor += tmp
        for other in range(local_size, p, local_size):
            mc.send(tensor, other)
    else:
        mc.send(tensor, 0)
        mc.recv(tensor, 0)
    for r in members:
        mc.send(tensor, r)


def test_hierarchical_right_answer_passes(capsys):
    assert ex.check_hierarchical_all_reduce(leader_all_reduce, local_size=4) > 0
    assert ex.check_hierarchical_all_reduce(leader_all_reduce, local_size=2, world_sizes=(2, 4, 6)) > 0
    assert "only node leaders" in capsys.readouterr().out


def no_inter_node_step(tensor: torch.Tensor, local_size: int) -> None:
    """Forgets step 2: each node ends with its own sum only."""
    rank = mc.get_rank()
    leader = rank - rank % local_size
    if rank != leader:
        mc.send(tensor, leader)
        mc.recv(tensor, leader)
        return
    tmp = torch.empty_like(tensor)
    for r in range(leader + 1, leader + local_size):
        mc.recv(tmp, r)
        tensor += tmp
    for r in range(leader + 1, leader + local_size):
        mc.send(tensor, r)


def test_hierarchical_missing_nodes_named():
    with pytest.raises(ExerciseFailure, match="missing ranks 4, 5, 6, 7"):
        ex.check_hierarchical_all_reduce(no_inter_node_step, local_size=4)


def leaders_send_first(tensor: torch.Tensor, local_size: int) -> None:
    """Step 2 as "everyone sends, then receives" between two leaders: deadlocks with rendezvous sends."""
    rank, p = mc.get_rank(), mc.get_world_size()
    leader = rank - rank % local_size
    if rank != leader:
        mc.send(tensor, leader)
        mc.recv(tensor, leader)
        return
    tmp = torch.empty_like(tensor)
    for r in range(leader + 1, leader + local_size):
        mc.recv(tmp, r)
        tensor += tmp
    mine = tensor.clone()
    for other in range(0, p, local_size):
        if other != leader:
            mc.send(mine, other)
    for other in range(0, p, local_size):
        if other != leader:
            mc.recv(tmp, other)
            tensor += tmp
    for r in range(leader + 1, leader + local_size):
        mc.send(tensor, r)


def test_hierarchical_deadlock_named():
    with pytest.raises(ExerciseFailure, match="(?i)deadlock|wait"):
        ex.check_hierarchical_all_reduce(leaders_send_first, local_size=4, world_sizes=(8,))


def flat_gather(tensor: torch.Tensor, local_size: int) -> None:
    """Correct, but every rank talks to rank 0 directly: not hierarchical."""
    rank, p = mc.get_rank(), mc.get_world_size()
    if rank:
        mc.send(tensor, 0)
        mc.recv(tensor, 0)
        return
    tmp = torch.empty_like(tensor)
    for r in range(1, p):
        mc.recv(tmp, r)
        tensor += tmp
    for r in range(1, p):
        mc.send(tensor, r)


def test_hierarchical_non_leader_crossing_named():
    with pytest.raises(AssertionError, match="only the leaders"):
        ex.check_hierarchical_all_reduce(flat_gather, local_size=4)


def test_hierarchical_needs_a_divisible_world():
    with pytest.raises(AssertionError, match="multiple of local_size"):
        ex.check_hierarchical_all_reduce(leader_all_reduce, local_size=4, world_sizes=(3, 5))


# --- numeric checks -------------------------------------------------------------------


def _rates():
    two = cluster("dgx_h100", 2)
    return two.link_bw[two.link_class == NVLINK][0], two.link_bw[two.link_class == NET].min()


def test_ring_vs_hierarchical():
    b_nv, b_net = _rates()
    t_ring = 2 * 15 / 16 * GIB / b_net
    t_hier = 2 * 7 / 8 * GIB / b_nv + 2 * 1 / 2 * (GIB / 8) / b_net
    ex.check_ring_vs_hierarchical(t_ring, t_hier)
    with pytest.raises(AssertionError, match="swapped"):
        ex.check_ring_vs_hierarchical(t_hier, t_ring)
    with pytest.raises(AssertionError, match="slowest link"):
        ex.check_ring_vs_hierarchical(2 * 15 / 16 * GIB / b_nv, t_hier)  # the ring on NVLink
    with pytest.raises(AssertionError, match="three phases"):
        ex.check_ring_vs_hierarchical(t_ring, 2 * 1 / 2 * GIB / b_net)  # the whole vector across nodes
    with pytest.raises(AssertionError, match="replace None"):
        ex.check_ring_vs_hierarchical(None, t_hier)


def test_inter_node_bytes():
    ex.check_inter_node_bytes(2 * 3 / 4 * GIB / 8)
    assert ex.inter_node_bytes() == pytest.approx(2 * 3 / 4 * GIB / 8)
    with pytest.raises(AssertionError, match="WHOLE vector"):
        ex.check_inter_node_bytes(2 * 3 / 4 * GIB)
    with pytest.raises(AssertionError, match="off by"):
        ex.check_inter_node_bytes(3 / 4 * GIB / 8)


def test_ring_latency():
    """NCCL's latency of a 4096-GPU ring: 8.4 + 7168 x 3.4 + 1022 x 14 us, times nothing else."""
    p, nodes = 4096, 512
    base, intra, inter = 8.4e-6, 3.4e-6, 14e-6
    want = base + (2 * (p - 1) - 2 * (nodes - 1)) * intra + 2 * (nodes - 1) * inter
    assert ex.ring_latency() == pytest.approx(want)
    ex.check_ring_latency(want)
    with pytest.raises(AssertionError, match="only 1022 of the 8190 steps"):
        ex.check_ring_latency(base + 2 * (p - 1) * inter)
    with pytest.raises(AssertionError, match="once per collective"):
        ex.check_ring_latency(2 * (p - 1) * (base + inter))
    with pytest.raises(AssertionError, match="off by"):
        ex.check_ring_latency(want / 2)


def _nccl_ring_protocol(nbytes: int) -> str:
    """NCCL's ring all-reduce model on one DGX H100, written out from the constants."""
    p, nch, bw = 8, 12, 30.0  # the ring graph NCCL's search finds: 12 channels of 30 GB/s
    lat = {
        pr: K.BASE_LATENCY["Ring"][pr] + 2 * (p - 1) * K.HW_LATENCY["NVLink"]["Ring"][pr]
        for pr in K.PROTOCOLS
    }
    bus = {
        "Simple": nch * bw,
        "LL128": min(K.LL128_FACTOR * nch * bw, nch * K.PER_CHANNEL_RING_LL128["hopper"]),
        "LL": min(K.LL_MAX_BW["hopper"][0], K.RING_LL_FACTOR * nch * bw),
    }
    t = {pr: lat[pr] + nbytes / (1000 * bus[pr] * p / (2 * (p - 1))) for pr in bus}
    return min(t, key=t.get)


def test_protocol_choice():
    ex.check_protocol_choice(_nccl_ring_protocol)
    with pytest.raises(AssertionError, match="'LL' is faster"):
        ex.check_protocol_choice(lambda n: "simple")
    with pytest.raises(AssertionError, match="at 8388608 bytes you picked 'll', but 'LL128' is faster"):
        ex.check_protocol_choice(lambda n: "ll" if n < 1 << 28 else "simple")  # LL for too long
    with pytest.raises(
        AssertionError, match="but 'LL' is faster"
    ):  # 2.19's LL factor moves the switch too early
        ex.check_protocol_choice(lambda n: "ll" if n < 1 << 20 else "ll128" if n < 1 << 25 else "simple")
    with pytest.raises(AssertionError, match="expected one of"):
        ex.check_protocol_choice(lambda n: "fast")
    with pytest.raises(AssertionError, match="return a protocol name"):
        ex.check_protocol_choice(lambda n: None)
