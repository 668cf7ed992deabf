"""Chapter 5's exercise checks: right answers pass, wrong ones fail with a message that helps."""

from __future__ import annotations

import pytest
import torch

import mycollectives as mc
from mycollectives.book.exercises import parallel as ex
from mycollectives.steptime.config import LLAMA3_8B, LLAMA3_70B
from mycollectives.steptime.layout import Layout


def test_tp_bytes_right_and_wrong():
    m, t = LLAMA3_70B, 8
    right = 4 * m.layers * 2 * (t - 1) / t * m.seq * m.hidden * m.act_bytes
    ex.check_tp_bytes(right)
    with pytest.raises(AssertionError, match="forward pass only"):
        ex.check_tp_bytes(right / 2)
    with pytest.raises(AssertionError, match="2\\(t-1\\)/t"):
        ex.check_tp_bytes(4 * m.layers * m.seq * m.hidden * m.act_bytes)


@pytest.mark.parametrize(
    "check, placeholder",
    [
        (ex.check_tp_bytes, None),
        (ex.check_fsdp_network_bytes, None),
        (lambda a: ex.check_design("moe", a), None),
        (ex.check_collective_matmul, lambda x, w: ...),
    ],
)
def test_a_check_on_the_placeholder_says_not_answered_and_reveals_nothing(capsys, check, placeholder):
    check(placeholder)
    out = capsys.readouterr().out
    assert out.startswith("not answered yet") and out.count("\n") == 1
    assert not any(ch.isdigit() for ch in out), out


def test_fsdp_network_bytes_right_and_wrong():
    psi = LLAMA3_8B.params * 2
    right = 3 * 7 / 8 * psi / 8
    ex.check_fsdp_network_bytes(right)
    with pytest.raises(AssertionError, match="flat ring"):
        ex.check_fsdp_network_bytes(3 * 63 / 64 * psi)
    with pytest.raises(AssertionError, match="twice"):
        ex.check_fsdp_network_bytes(2 * 7 / 8 * psi / 8)
    # chapter 5's exercise: Llama 3 70B over 128 GPUs (16 nodes)
    psi70 = LLAMA3_70B.params * 2
    ex.check_fsdp_network_bytes(3 * 15 / 16 * psi70 / 8, LLAMA3_70B, 128)
    with pytest.raises(AssertionError, match="flat ring"):
        ex.check_fsdp_network_bytes(3 * 127 / 128 * psi70, LLAMA3_70B, 128)
    with pytest.raises(AssertionError, match="off by"):
        ex.check_fsdp_network_bytes(3 * 7 / 8 * psi70 / 8, LLAMA3_70B, 128)  # 8 nodes' answer


def ring_matmul(x, w):
    r, p, n = mc.get_rank(), mc.get_world_size(), x.shape[0]
    out = x.new_empty(p * n, w.shape[1])
    held = x.contiguous()
    for step in range(p):
        src = (r - step) % p
        if step < p - 1:
            nxt = torch.empty_like(held)
            recv = mc.irecv(nxt, (r - 1) % p)
            send = mc.isend(held, (r + 1) % p)
        out[src * n : (src + 1) * n] = held @ w
        if step < p - 1:
            recv.wait()
            send.wait()
            held = nxt
    return out


def test_collective_matmul_right_answer_passes(capsys):
    ex.check_collective_matmul(ring_matmul)
    assert "p - 1 messages per rank" in capsys.readouterr().out


def test_collective_matmul_that_sends_first_hangs_and_is_told():
    def blocking(x, w):
        r, p, n = mc.get_rank(), mc.get_world_size(), x.shape[0]
        out, held = x.new_empty(p * n, w.shape[1]), x
        for step in range(p):
            out[((r - step) % p) * n : ((r - step) % p + 1) * n] = held @ w
            if step < p - 1:
                mc.send(held, (r + 1) % p)  # every rank sends first: rendezvous sends deadlock
                nxt = torch.empty_like(held)
                mc.recv(nxt, (r - 1) % p)
                held = nxt
        return out

    with pytest.raises(AssertionError, match="deadlock|raised"):
        ex.check_collective_matmul(blocking, world_sizes=(2,))


def test_collective_matmul_with_blocks_in_the_wrong_place_is_told():
    def wrong(x, w):
        out = ring_matmul(x, w)
        return out.roll(3, dims=0)

    with pytest.raises(AssertionError, match="block"):
        ex.check_collective_matmul(wrong, world_sizes=(2, 3))


def test_collective_matmul_with_a_collective_is_refused():
    def gathered(x, w):
        p = mc.get_world_size()
        full = x.new_empty(p * x.shape[0], x.shape[1])
        mc.all_gather_into_tensor(full, x)
        return full @ w

    with pytest.raises(AssertionError, match="isend and mc.irecv only"):
        ex.check_collective_matmul(gathered, world_sizes=(2,))


def test_design_accepts_a_good_layout_and_refuses_bad_ones():
    ex.check_design("moe", Layout(dp=32, ep=8, zero=1, microbatches=8))
    with pytest.raises(AssertionError, match="uses 16 GPUs"):
        ex.check_design("moe", Layout(dp=16, ep=8, zero=1, microbatches=16))
    with pytest.raises(AssertionError, match="256"):
        ex.check_design("moe", Layout(dp=32, ep=8, zero=1, microbatches=4))
    with pytest.raises(AssertionError, match="more than the H100"):
        ex.check_design("moe", Layout(dp=32, zero=0, microbatches=8))
    with pytest.raises(AssertionError, match="rules out pipeline"):
        ex.check_design("moe", Layout(pp=2, dp=16, ep=8, zero=1, microbatches=16))
    with pytest.raises(AssertionError, match="loses the most to exposed EP communication"):
        ex.check_design("moe", Layout(tp=2, sp=True, dp=16, ep=8, zero=3, microbatches=16, recompute="full"))
    with pytest.raises(AssertionError, match="inside a node"):
        ex.check_design("moe", Layout(tp=32, sp=True, dp=1, microbatches=256))


def test_design_answers_of_the_chapter_pass():
    ex.check_design("70b", Layout(dp=512, zero=3, recompute="full"))
    ex.check_design("405b-long", Layout(tp=8, sp=True, cp=32, pp=8, dp=8, zero=1, microbatches=16))


def test_llama3s_own_long_context_layout_passes_and_wrong_ones_are_told_why():
    # Dubey et al. 2024, table 4: 16,384 GPUs, TP 8, CP 16, PP 16, DP 8, 128K tokens, 16M tokens per step
    ex.check_design("405b-long", Layout(tp=8, sp=True, cp=16, pp=16, dp=8, zero=1, microbatches=16))
    with pytest.raises(AssertionError, match="more than the H100"):  # the sequence on one node
        ex.check_design("405b-long", Layout(tp=8, sp=True, pp=16, dp=128, zero=1))
    with pytest.raises(AssertionError, match="loses the most to the pipeline bubble"):
        ex.check_design("405b-long", Layout(tp=8, sp=True, cp=8, pp=2, dp=128, zero=3))
    with pytest.raises(AssertionError, match="spans 2 nodes"):
        ex.check_design("405b-long", Layout(tp=16, sp=True, cp=16, pp=16, dp=4, zero=1, microbatches=32))
