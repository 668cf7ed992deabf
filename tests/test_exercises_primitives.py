"""Chapter 2's exercise checks: right answers pass, plausible wrong ones fail
with a message that names the mistake. Also the before/after pictures of
``mycollectives.viz.collectives`` against the package's own schedules."""

from __future__ import annotations

import pytest
import torch

import mycollectives as mc
from mycollectives.book.exercises import ExerciseFailure, check_collective
from mycollectives.book.exercises.primitives import (
    LINKS,
    check_all_gather_traffic,
    check_alpha_beta,
    check_bound,
    check_busbw,
    check_half_bandwidth,
    check_message_time,
    check_ring_latency,
    check_ring_shift,
    check_traffic_and_busbw,
)
from tests.unanswered import assert_not_answered

SMALL = dict(world_sizes=(1, 2, 3, 4), counts=(0, 3, 5), dtypes=(torch.float32,))
MiB = 1 << 20


# --- numeric checks ----------------------------------------------------------


def test_link_figures_are_the_cited_ones():
    assert LINKS["nvlink4"].bandwidth == 450e9  # 18 links x 25 GB/s, one direction
    assert LINKS["nvlink3"].bandwidth == 300e9
    assert LINKS["ndr"].bandwidth == 50e9 and LINKS["hdr"].bandwidth == 25e9
    assert LINKS["nvlink4"].alpha == pytest.approx(11.8e-6) and LINKS["ndr"].alpha == pytest.approx(22.4e-6)
    ndr = LINKS["ndr"]
    assert ndr.time(ndr.half_bandwidth_bytes) == pytest.approx(2 * ndr.alpha)


def test_message_time(capsys):
    check_message_time(11.8e-6 + MiB / 450e9, "nvlink4", MiB)
    assert "Correct" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="bandwidth term alone"):
        check_message_time(MiB / 450e9, "nvlink4", MiB)
    with pytest.raises(AssertionError, match="one direction"):
        check_message_time(11.8e-6 + MiB / 900e9, "nvlink4", MiB)
    assert_not_answered(check_message_time, None, "ndr", MiB)
    with pytest.raises(ValueError, match="link must be one of"):
        check_message_time(1.0, "nvlink5", MiB)


def test_message_time_names_a_missing_base_latency():
    lk = LINKS["nvlink4"]
    with pytest.raises(AssertionError, match="base latency"):
        check_message_time(lk.step + MiB * lk.beta, "nvlink4", MiB)


def test_alpha_beta_reports_every_part_only_once_all_pass(capsys):
    right = (11.8e-6 + MiB / 450e9, 22.4e-6 + MiB / 50e9, 22.4e-6 * 50e9, "latency")
    check_alpha_beta(*right)
    out = capsys.readouterr().out
    assert out.count("Correct") == 4 and all(len(line) <= 78 for line in out.splitlines())
    with pytest.raises(AssertionError, match="latency-bound"):
        check_alpha_beta(*right[:3], "bandwidth")  # three right parts, the last wrong
    assert capsys.readouterr().out == ""  # no success printed before the failure


def test_traffic_and_busbw_together(capsys):
    p, b, size, t = 16, 2 * MiB, 64 * MiB, 1.2e-3
    check_traffic_and_busbw((p - 1) * b, p * (p - 1) * b, size / t / 1e9 * (p - 1) / p)
    assert capsys.readouterr().out.count("Correct") == 3
    with pytest.raises(AssertionError, match="is algbw"):
        check_traffic_and_busbw((p - 1) * b, p * (p - 1) * b, size / t / 1e9)
    assert capsys.readouterr().out == ""


def test_ring_latency_pays_the_base_once(capsys):
    ndr = LINKS["ndr"]
    check_ring_latency(8.4e-6 + 30 * 14e-6, "ndr", 16)
    assert "Correct" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="once per collective"):
        check_ring_latency(30 * ndr.alpha, "ndr", 16)
    with pytest.raises(AssertionError, match="2\\(p-1\\) = 30 steps"):
        check_ring_latency(8.4e-6 + 15 * 14e-6, "ndr", 16)
    assert_not_answered(check_ring_latency, None, "ndr", 16)


def test_half_bandwidth_and_bound():
    check_half_bandwidth(22.4e-6 * 50e9, "ndr")
    with pytest.raises(AssertionError, match="off by 2x to 10x \\(too high\\)"):
        check_half_bandwidth(22.4e-6 * 400e9, "ndr")  # bits, not bytes
    check_bound("latency", "nvlink4", 64 << 10)
    check_bound("bandwidth", "ndr", 64 * MiB)
    with pytest.raises(AssertionError, match="latency-bound"):
        check_bound("bandwidth", "nvlink4", 64 << 10)
    with pytest.raises(AssertionError, match='"latency" or "bandwidth"'):
        check_bound("alpha", "nvlink4", 64 << 10)


def test_busbw_refuses_a_world_size_where_skipping_the_factor_passes():
    with pytest.raises(ValueError, match="world_size=2: busbw equals algbw"):
        check_busbw(10.0, "all_reduce", 1 << 26, 1e-3, 2)
    with pytest.raises(AssertionError, match="is algbw"):
        check_busbw((1 << 26) / 1e-3 / 1e9, "all_reduce", 1 << 26, 1e-3, 4)  # the benchmarks page's: p = 4


def test_busbw():
    p, size, t = 16, 64 * MiB, 1.2e-3
    algbw = size / t / 1e9
    check_busbw(algbw * (p - 1) / p, "all_gather", size, t, p)
    with pytest.raises(AssertionError, match="is algbw"):
        check_busbw(algbw, "all_gather", size, t, p)
    with pytest.raises(AssertionError, match="GB/s"):
        check_busbw(algbw * (p - 1) / p * 1e9, "all_gather", size, t, p)
    check_busbw(algbw * 2 * (p - 1) / p, "all_reduce", size, t, p)


def test_all_gather_traffic(capsys):
    check_all_gather_traffic(15 * 2 * MiB, 16 * 15 * 2 * MiB, 16, 2 * MiB)
    capsys.readouterr()
    with pytest.raises(AssertionError, match="own block"):
        check_all_gather_traffic(16 * 2 * MiB, 16 * 16 * 2 * MiB, 16, 2 * MiB)
    with pytest.raises(AssertionError, match="all ranks together"):
        check_all_gather_traffic(15 * 2 * MiB, 15 * 2 * MiB, 16, 2 * MiB)
    assert capsys.readouterr().out == ""  # the first part was right, but nothing was printed


# --- the ring shift -----------------------------------------------------------


def good_ring_shift(send, recv):
    rank, p = mc.get_rank(), mc.get_world_size()
    if p == 1:
        recv.copy_(send)
        return
    hs = [mc.irecv(recv, (rank - 1) % p), mc.isend(send, (rank + 1) % p)]
    for h in hs:
        h.wait()


def blocking_ring_shift(send, recv):  # fine while sends are buffered, deadlocks under rendezvous
    rank, p = mc.get_rank(), mc.get_world_size()
    if p == 1:
        recv.copy_(send)
        return
    mc.send(send, (rank + 1) % p)
    mc.recv(recv, (rank - 1) % p)


def wrong_direction_shift(send, recv):
    rank, p = mc.get_rank(), mc.get_world_size()
    if p == 1:
        recv.copy_(send)
        return
    hs = [mc.irecv(recv, (rank + 1) % p), mc.isend(send, (rank - 1) % p)]
    for h in hs:
        h.wait()


def test_ring_shift_right_answer(capsys):
    assert check_ring_shift(good_ring_shift) is None  # a check cell shows no stray return value
    assert "passed 48 cases" in capsys.readouterr().out


def test_ring_shift_deadlock_is_named():
    with pytest.raises(AssertionError, match="(?i)deadlock"):
        check_ring_shift(blocking_ring_shift)


def test_ring_shift_reports_the_deadlock_before_the_one_rank_case():
    def send_then_receive(send, recv):  # the naive ring, and no care for p = 1
        rank, p = mc.get_rank(), mc.get_world_size()
        mc.send(send, (rank + 1) % p)
        mc.recv(recv, (rank - 1) % p)

    with pytest.raises(AssertionError, match="(?i)world size 2.*deadlock") as info:
        check_ring_shift(send_then_receive)
    assert "copy the tensor" not in str(info.value)


def test_ring_shift_wrong_neighbour():
    with pytest.raises(AssertionError, match="left neighbour"):
        check_ring_shift(wrong_direction_shift)


def test_ring_shift_one_rank_hint():
    def no_single_rank_case(send, recv):
        rank, p = mc.get_rank(), mc.get_world_size()
        hs = [mc.irecv(recv, (rank - 1) % p), mc.isend(send, (rank + 1) % p)]
        for h in hs:
            h.wait()

    with pytest.raises(AssertionError, match="copy the tensor"):
        check_ring_shift(no_single_rank_case)


# --- the "implement" exercises through check_collective --------------------------


def naive_reduce(tensor, dst):
    rank, p = mc.get_rank(), mc.get_world_size()
    if rank != dst:
        mc.send(tensor, dst)
        return
    incoming = torch.empty_like(tensor)
    for src in range(p):
        if src != dst:
            mc.recv(incoming, src)
            tensor += incoming


def my_all_to_all(output, input):
    rank, p = mc.get_rank(), mc.get_world_size()
    b = input.numel() // p
    output[rank * b : (rank + 1) * b] = input[rank * b : (rank + 1) * b]
    hs = []
    for peer in range(p):
        if peer != rank:
            hs.append(mc.irecv(output[peer * b : (peer + 1) * b], peer))
            hs.append(mc.isend(input[peer * b : (peer + 1) * b], peer))
    for h in hs:
        h.wait()


def all_reduce_rs_ag(tensor):
    p, n = mc.get_world_size(), tensor.numel()
    b = -(-n // p)
    padded = torch.zeros(p * b, dtype=tensor.dtype)
    padded[:n] = tensor
    mine = torch.empty(b, dtype=tensor.dtype)
    mc.reduce_scatter_tensor(mine, padded)
    mc.all_gather_into_tensor(padded, mine)
    tensor.copy_(padded[:n])


def test_solutions_pass():
    assert check_collective(naive_reduce, "reduce", sends_per_rank=lambda p: 1, **SMALL) > 0
    assert check_collective(my_all_to_all, "all_to_all", sends_per_rank=lambda p: p - 1, **SMALL) > 0
    assert check_collective(all_reduce_rs_ag, "all_reduce", allow_collectives=True, **SMALL) > 0


def test_reduce_forgetting_the_root_is_named():
    def forgets_root(tensor, dst):
        rank, p = mc.get_rank(), mc.get_world_size()
        if rank != dst:
            mc.send(tensor, dst)
            return
        acc, incoming = torch.zeros_like(tensor), torch.empty_like(tensor)
        for src in range(p):
            if src != dst:
                mc.recv(incoming, src)
                acc += incoming
        tensor.copy_(acc)  # the root's own contribution is lost

    with pytest.raises(ExerciseFailure, match="missing rank"):
        check_collective(forgets_root, "reduce", world_sizes=(3,), counts=(5,), dtypes=(torch.float32,))


def test_all_to_all_with_blocking_sends_deadlocks():
    def blocking(output, input):
        rank, p = mc.get_rank(), mc.get_world_size()
        b = input.numel() // p
        output[rank * b : (rank + 1) * b] = input[rank * b : (rank + 1) * b]
        for peer in range(p):
            if peer != rank:
                mc.send(input[peer * b : (peer + 1) * b], peer)
        for peer in range(p):
            if peer != rank:
                mc.recv(output[peer * b : (peer + 1) * b], peer)

    with pytest.raises(ExerciseFailure, match="(?i)deadlock|waits"):
        check_collective(blocking, "all_to_all", **SMALL)


def test_all_to_all_transposed_blocks_are_named():
    def keeps_own_slot(output, input):  # receives rank j's block j instead of block `rank`
        rank, p = mc.get_rank(), mc.get_world_size()
        b = input.numel() // p
        output.copy_(input)
        hs = []
        for peer in range(p):
            if peer != rank:
                hs.append(mc.irecv(output[peer * b : (peer + 1) * b], peer))
                hs.append(mc.isend(input[rank * b : (rank + 1) * b], peer))
        for h in hs:
            h.wait()

    with pytest.raises(ExerciseFailure, match="rank"):
        check_collective(keeps_own_slot, "all_to_all", **SMALL)


def test_rs_ag_without_padding_is_named():
    def unpadded(tensor):
        p = mc.get_world_size()
        b = tensor.numel() // p  # drops the remainder
        mine = torch.empty(b, dtype=tensor.dtype)
        mc.reduce_scatter_tensor(mine, tensor[: p * b].clone())
        out = torch.empty(p * b, dtype=tensor.dtype)
        mc.all_gather_into_tensor(out, mine)
        tensor[: p * b] = out

    with pytest.raises(ExerciseFailure, match="world size"):
        check_collective(unpadded, "all_reduce", allow_collectives=True, **SMALL)


def test_rs_ag_needs_permission_for_collectives():
    with pytest.raises(ExerciseFailure, match="send/recv"):
        check_collective(all_reduce_rs_ag, "all_reduce", **SMALL)


# --- before/after pictures agree with the schedules ----------------------------


@pytest.mark.parametrize(
    "collective", ["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast"]
)
@pytest.mark.parametrize("p", [2, 3, 4])
def test_pictures_match_schedules(collective, p):

    from mycollectives.algorithms import Spec, build
    from mycollectives.viz.buffers import buffer_states
    from mycollectives.viz.collectives import collective_blocks

    _, after = collective_blocks(collective, p)
    if collective == "all_to_all":
        spec = Spec(collective, p, splits=tuple((1,) * p for _ in range(p)))
    elif collective in ("all_gather", "reduce_scatter"):
        spec = Spec(collective, p, count=1)
    else:
        spec = Spec(collective, p, count=p)  # one element per block
    final = buffer_states(build(spec, mc.algorithms(collective)[0]))[-1]
    for r in range(p):
        want = [b[0] if b else None for b in after[r]]
        got = [int(m) for m in final[r]]
        for j, w in enumerate(want):
            if w is not None:
                assert got[j] == w, (collective, p, r, j, got, want)


def test_draw_collective_draws_every_collective():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mycollectives.viz.collectives import SHOWN, draw_collective

    for name in SHOWN:
        axes = draw_collective(name, 3, root=1)
        assert len(axes) == 2 and axes[0].get_title().startswith(name)
        plt.close("all")
    with pytest.raises(ValueError, match="root"):
        draw_collective("broadcast", 3, root=3)
