"""Chapter 4's exercise checks: right answers pass, wrong ones fail with a message that helps."""

from __future__ import annotations

import pytest
import torch

import mycollectives as mc
from mycollectives.book.exercises import ExerciseFailure, nccl_model
from mycollectives.book.exercises import topology as ex
from mycollectives.nccl import constants as K
from mycollectives.nccl.model import time_us as nccl_model_time
from mycollectives.sim.nccl import choose
from mycollectives.sim.nccl import system as nccl_system
from mycollectives.sim.tuner import tune
from mycollectives.topology import NET, NVLINK, cluster, dgx_a100, dgx_b200
from tests.unanswered import assert_not_answered

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
    assert ex.check_hierarchical_all_reduce(leader_all_reduce, local_size=4) is None  # nothing to echo
    out = capsys.readouterr().out
    assert "all_reduce passes all" in out and "only node leaders" in out
    ex.check_hierarchical_all_reduce(leader_all_reduce, local_size=2, world_sizes=(2, 4, 6))
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


def test_hierarchical_non_leader_crossing_named(capsys):
    with pytest.raises(AssertionError, match="only the leaders"):
        ex.check_hierarchical_all_reduce(flat_gather, local_size=4)
    assert "Correct" not in capsys.readouterr().out  # no success printed before the failure


def test_hierarchical_needs_a_divisible_world():
    with pytest.raises(AssertionError, match="multiple of local_size"):
        ex.check_hierarchical_all_reduce(leader_all_reduce, local_size=4, world_sizes=(3, 5))


# --- numeric checks -------------------------------------------------------------------


def _rates():
    two = cluster("dgx_h100", 2)
    return two.link_bw[two.link_class == NVLINK][0], two.link_bw[two.link_class == NET].min()


def test_ring_vs_hierarchical(capsys):
    b_nv, b_net = _rates()
    t_ring = 2 * 15 / 16 * GIB / b_net
    t_hier = 2 * 7 / 8 * GIB / b_nv + 2 * 1 / 2 * (GIB / 8) / b_net
    ex.check_ring_vs_hierarchical(t_ring, t_hier)
    assert "Correct" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="swapped"):
        ex.check_ring_vs_hierarchical(t_hier, t_ring)
    assert_not_answered(ex.check_ring_vs_hierarchical, None, t_hier)


@pytest.mark.parametrize(
    "rate, says",
    [
        (NVLINK, "the wrong link"),  # the ring on NVLink
        (50e9, "the right link .* at the wrong rate: 50 GB/s is its datasheet line rate"),
        (400e9, "gigabits"),
        ("half the steps", "reduce-scatter AND an all-gather"),
        (37e9, "no link's rate"),
    ],
)
def test_ring_time_wrong_link_and_wrong_rate_told_apart(rate, says):
    """The hint says which is wrong: the link a step waits for, or the rate of the right link."""
    b_nv, b_net = _rates()
    t_hier = 2 * 7 / 8 * GIB / b_nv + 2 * 1 / 2 * (GIB / 8) / b_net
    if rate == NVLINK:
        t_ring = 2 * 15 / 16 * GIB / b_nv
    elif rate == "half the steps":
        t_ring = 15 / 16 * GIB / b_net
    else:
        t_ring = 2 * 15 / 16 * GIB / rate
    with pytest.raises(AssertionError, match=says):
        ex.check_ring_vs_hierarchical(t_ring, t_hier)


def test_hierarchical_time_hints():
    b_nv, b_net = _rates()
    t_ring = 2 * 15 / 16 * GIB / b_net
    t_nv, t_net = 2 * 7 / 8 * GIB / b_nv, (GIB / 8) / b_net
    with pytest.raises(AssertionError, match="network phase alone"):
        ex.check_ring_vs_hierarchical(t_ring, t_net)
    with pytest.raises(AssertionError, match="NVLink phases alone"):
        ex.check_ring_vs_hierarchical(t_ring, t_nv)
    with pytest.raises(AssertionError, match="not all of it"):
        ex.check_ring_vs_hierarchical(t_ring, t_nv + 8 * t_net)  # the whole vector across nodes
    with pytest.raises(AssertionError, match="three phases"):
        ex.check_ring_vs_hierarchical(t_ring, 1.5 * (t_nv + t_net))


def _nic_times() -> dict[int, float]:
    """The solution's formula: NVLink phases, then the node's network bytes through its k NICs."""
    b_nv, b_net = _rates()
    return {k: 2 * 7 / 8 * GIB / b_nv + 2 * 3 / 4 * GIB / (k * b_net) for k in (1, 2, 4, 8)}


def test_nic_design(capsys):
    t = _nic_times()
    assert all(ex.hierarchical_by_nics(k) == pytest.approx(t[k], rel=1e-6) for k in t)  # formula = simulator
    ex.check_nic_design(t, 4)
    assert "4 NICs per node is the fewest" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="do not change with the number of NICs"):
        ex.check_nic_design({k: t[8] for k in t}, 4)  # every GPU through a NIC of its own
    with pytest.raises(AssertionError, match="network phase alone"):
        ex.check_nic_design({k: t[k] - 2 * 7 / 8 * GIB / _rates()[0] for k in t}, 4)
    with pytest.raises(AssertionError, match="so is a smaller count"):
        ex.check_nic_design(t, 8)
    with pytest.raises(AssertionError, match="too slow"):
        ex.check_nic_design(t, 2)
    with pytest.raises(AssertionError, match="no entry for"):
        ex.check_nic_design({8: t[8]}, 8)
    with pytest.raises(AssertionError, match="off by"):
        ex.check_nic_design({k: 1.1 * v for k, v in t.items()}, 4)
    assert "Correct" not in capsys.readouterr().out


def test_two_level_bytes(capsys):
    block = GIB / 32
    ex.check_two_level_bytes(3 * block, 31 * block)
    assert "3 blocks" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="all-reduce's"):
        ex.check_two_level_bytes(6 * block, 31 * block)
    with pytest.raises(AssertionError, match="off by"):
        ex.check_two_level_bytes(4 * block, 31 * block)
    with pytest.raises(AssertionError, match="ring_bytes is 7 blocks"):
        ex.check_two_level_bytes(3 * block, 7 * block)  # right first answer, wrong second: no "Correct"
    assert "Correct" not in capsys.readouterr().out


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
    nccl_model.check_protocol_choice(_nccl_ring_protocol)
    with pytest.raises(
        AssertionError, match="at 8 bytes you picked 'simple', but another protocol is faster"
    ):
        nccl_model.check_protocol_choice(lambda n: "simple")
    with pytest.raises(AssertionError, match=r"at \d+ bytes you picked 'll', but another protocol is faster"):
        nccl_model.check_protocol_choice(lambda n: "ll" if n < 1 << 28 else "simple")  # LL for too long
    with pytest.raises(
        AssertionError, match="but another protocol is faster"
    ):  # 2.19's LL factor moves the switch too early
        nccl_model.check_protocol_choice(
            lambda n: "ll" if n < 1 << 20 else "ll128" if n < 1 << 25 else "simple"
        )
    with pytest.raises(AssertionError, match="expected one of"):
        nccl_model.check_protocol_choice(lambda n: "fast")
    assert_not_answered(nccl_model.check_protocol_choice, _placeholder)


def _placeholder(nbytes: int) -> str:
    raise NotImplementedError  # your code


def _a100_capped(nbytes: int, caps: bool = True) -> str:
    """The chapter's A100 exercise written out, with or without the protocols' ceilings."""
    p, ring = 8, nccl_system(dgx_a100()).graphs["ring"]
    bus = ring.channels * ring.bw_intra
    cap = {
        "Simple": bus,
        "LL128": min(
            K.LL128_FACTOR * bus, ring.channels * K.PER_CHANNEL_RING_LL128["ampere"] if caps else 1e9
        ),
        "LL": min(K.LL_MAX_BW["ampere"][0] if caps else 1e9, K.RING_LL_FACTOR * bus),
    }
    lat = {pr: K.BASE_LATENCY["Ring"][pr] + 2 * (p - 1) * K.HW_LATENCY["NVLink"]["Ring"][pr] for pr in cap}
    return min(cap, key=lambda pr: lat[pr] + nbytes / (1000 * cap[pr] * p / (2 * (p - 1))))


def test_protocol_choice_needs_the_caps():
    """Without LL's ceiling the A100 model agrees with NCCL's on every power of two: the check
    also tries the sizes either side of each crossover, where it does not."""
    nccl_model.check_protocol_choice(_a100_capped, dgx_a100())
    with pytest.raises(AssertionError, match="another protocol is faster.*ceiling"):
        nccl_model.check_protocol_choice(lambda n: _a100_capped(n, caps=False), dgx_a100())
    with pytest.raises(AssertionError, match="return a protocol name"):
        nccl_model.check_protocol_choice(lambda n: None)


def _a100_ring_protocol(nbytes: int) -> str:
    """Chapter 4's solution, on one DGX A100: the ring graph from the search, Ampere's caps."""
    from mycollectives.sim.nccl import system

    p, ring = 8, system(dgx_a100()).graphs["ring"]
    bus = ring.channels * ring.bw_intra
    cap = {
        "Simple": bus,
        "LL128": min(K.LL128_FACTOR * bus, ring.channels * K.PER_CHANNEL_RING_LL128["ampere"]),
        "LL": min(K.LL_MAX_BW["ampere"][0], K.RING_LL_FACTOR * bus),
    }
    lat = {pr: K.BASE_LATENCY["Ring"][pr] + 2 * (p - 1) * K.HW_LATENCY["NVLink"]["Ring"][pr] for pr in cap}
    return min(cap, key=lambda pr: lat[pr] + nbytes / (1000 * cap[pr] * p / (2 * (p - 1))))


def test_protocol_choice_on_an_a100(capsys):
    nccl_model.check_protocol_choice(_a100_ring_protocol, dgx_a100())
    assert "Correct" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="at 8 bytes .* another protocol is faster"):
        nccl_model.check_protocol_choice(lambda n: "ll128", dgx_a100())


def _b200(nbytes: int, ll128_cap: bool = True) -> str:
    """Chapter 4's exercise on one DGX B200, where LL128's per-channel ceiling binds
    (16 channels of 45 GB/s: 0.92 x 720 = 662 GB/s against 16 x 40 = 640)."""
    p, ring = 8, nccl_system(dgx_b200()).graphs["ring"]
    bus = ring.channels * ring.bw_intra
    per_channel = ring.channels * K.PER_CHANNEL_RING_LL128["blackwell"] if ll128_cap else float("inf")
    cap = {
        "Simple": bus,
        "LL128": min(K.LL128_FACTOR * bus, per_channel),
        "LL": min(K.LL_MAX_BW["blackwell"][0], K.RING_LL_FACTOR * bus),
    }
    lat = {pr: K.BASE_LATENCY["Ring"][pr] + 2 * (p - 1) * K.HW_LATENCY["NVLink"]["Ring"][pr] for pr in cap}
    return min(cap, key=lambda pr: lat[pr] + nbytes / (1000 * cap[pr] * p / (2 * (p - 1))))


def test_protocol_choice_on_a_b200_needs_the_ll128_cap(capsys):
    nccl_model.check_protocol_choice(_b200, dgx_b200())
    assert "Correct" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="picked 'LL128', but another protocol is faster"):
        nccl_model.check_protocol_choice(lambda n: _b200(n, ll128_cap=False), dgx_b200())


@pytest.mark.parametrize(
    "librarys",
    [
        lambda n: choose("all_reduce", n, dgx_b200(), algorithms=["Ring"])[1],
        lambda n: min(
            K.PROTOCOLS,
            key=lambda pr: nccl_model_time(nccl_system(dgx_b200()), "all_reduce", "Ring", pr, n),
        ),
        lambda n: tune("all_reduce", n, dgx_b200(), algorithms=["Ring"])[1],
    ],
    ids=["sim.nccl.choose", "nccl.model.time_us", "sim.tuner.tune"],
)
def test_protocol_choice_refuses_the_librarys_tuner(librarys):
    with pytest.raises(AssertionError, match="called the package's model of NCCL's tuner"):
        nccl_model.check_protocol_choice(librarys, dgx_b200())
