"""Chapter 3's exercises: the numeric checks accept the right answer and explain
a wrong one; the "implement" exercises accept a right algorithm and name the
problem of a plausible wrong one."""

from __future__ import annotations

import pytest
import torch

import mycollectives as mc
from mycollectives.book.exercises import ExerciseFailure, check_collective
from mycollectives.book.exercises.algorithms import (
    busiest_sender,
    check_all_reduce_design,
    check_broadcast_design,
    check_crossover,
    check_network_bytes,
    check_pat_messages,
    check_ring_and_doubling,
    check_rounds_and_bytes,
    network_bytes,
    pat_messages,
)
from mycollectives.cost import Machine
from mycollectives.schedule import ceil_log2
from tests.unanswered import assert_not_answered

pytestmark = pytest.mark.timeout(120)
SMALL = {"world_sizes": (1, 2, 3, 4, 5), "counts": (0, 1, 7)}
MiB = 1 << 20
MACHINE = Machine(alpha=5e-6, beta=1e-10, gamma=0.0)


# --- numeric checks ----------------------------------------------------------


def test_busiest_sender_counts_the_ring():
    assert busiest_sender("all_reduce", "ring", 6, 3 * MiB) == (10, 10 * (3 * MiB // 6))
    assert busiest_sender("all_reduce", "recursive_doubling", 8, MiB) == (3, 3 * MiB)


def test_rounds_and_bytes_right(capsys):
    check_rounds_and_bytes((10, 5 * MiB), "all_reduce", "ring", 6, 3 * MiB)
    check_rounds_and_bytes((4, 9 * MiB), "all_reduce", "recursive_doubling", 6, 3 * MiB)
    assert "Correct" in capsys.readouterr().out


def test_rounds_and_bytes_wrong():
    assert_not_answered(check_rounds_and_bytes, None, "all_reduce", "ring", 6, 3 * MiB)
    with pytest.raises(AssertionError, match="2 rounds is too low.*fold"):
        check_rounds_and_bytes((2, 6 * MiB), "all_reduce", "recursive_doubling", 6, 3 * MiB)
    with pytest.raises(
        AssertionError, match="6291456 bytes .2.000 of the vector. is off by 50 % to 2x \\(too low\\)"
    ):
        check_rounds_and_bytes((4, 6 * MiB), "all_reduce", "recursive_doubling", 6, 3 * MiB)
    with pytest.raises(AssertionError, match="give a pair"):
        check_rounds_and_bytes((10,), "all_reduce", "ring", 6, 3 * MiB)


def test_ring_and_doubling_together(capsys):
    check_ring_and_doubling((10, 5 * MiB), (4, 9 * MiB))
    assert capsys.readouterr().out.count("Correct") == 2
    with pytest.raises(AssertionError, match="fold"):
        check_ring_and_doubling((10, 5 * MiB), (3, 9 * MiB))  # the ring right, recursive doubling not
    assert capsys.readouterr().out == ""


def test_all_reduce_design(capsys):
    small = ("recursive_doubling", 6 * (10e-6 + (8 << 10) / 25e9))
    large = ("ring", 46 * (10e-6 + (1 << 30) / 24 / 25e9))
    check_all_reduce_design(small, large)
    assert capsys.readouterr().out.count("Correct") == 2
    with pytest.raises(AssertionError, match="ring takes .*x the fastest"):
        check_all_reduce_design(("ring", 460e-6), large)
    with pytest.raises(AssertionError, match="rabenseifner takes"):
        check_all_reduce_design(small, ("rabenseifner", 0.19))
    with pytest.raises(AssertionError, match="time"):
        check_all_reduce_design(small, ("ring", 0.0413))  # the bandwidth term of one direction
    with pytest.raises(AssertionError, match="choose one of"):
        check_all_reduce_design(("direct", 1e-3), large)
    assert capsys.readouterr().out == ""


def test_broadcast_design(capsys):
    t = (30 + 1024) * (5e-6 + (2 << 30) * 1e-10 / 1024)
    check_broadcast_design("chain", 1024, t)
    assert capsys.readouterr().out.count("Correct") == 2
    with pytest.raises(AssertionError, match="scatter_allgather takes .*which candidate"):
        check_broadcast_design("scatter_allgather", None, 0.416)
    with pytest.raises(AssertionError, match="too few"):
        check_broadcast_design("chain", 64, 0.3)
    with pytest.raises(AssertionError, match="too many"):
        check_broadcast_design("chain", 65536, 0.3)
    with pytest.raises(AssertionError, match="time"):
        check_broadcast_design("chain", 1024, (2 << 30) * 1e-10)  # the limit, without the fill
    assert capsys.readouterr().out == ""


def test_crossover_right_and_wrong(capsys):
    k, p = 3, 8
    derived = k * MACHINE.alpha / ((k - 2 * (p - 1) / p) * MACHINE.beta)
    check_crossover(derived, "all_reduce", "recursive_doubling", "rabenseifner", p, MACHINE)
    assert "Correct" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="off by 2x to 10x \\(too low\\)"):
        check_crossover(derived / 2, "all_reduce", "recursive_doubling", "rabenseifner", p, MACHINE)
    assert_not_answered(check_crossover, None, "all_reduce", "recursive_doubling", "rabenseifner", p, MACHINE)
    with pytest.raises(AssertionError, match="never overtakes"):
        check_crossover(1e6, "all_reduce", "rabenseifner", "ring", p, MACHINE)


def test_pat_messages_counts_the_schedule(capsys):
    """12 ranks, 96 KiB blocks, 512 KiB slots: four blocks a message; distances 8, 4, 2, 1
    carry 1, 1, 3 and 6 blocks, so 1 + 1 + 1 + 2 messages."""
    assert pat_messages(12, 96 << 10, 512 << 10) == (5, 4 * (96 << 10))
    assert pat_messages(16, 4) == (4, 8 * 4)  # tiny blocks: Bruck's count, half the blocks last
    assert pat_messages(16, 1 << 20) == (15, 1 << 20)  # a block per message: the ring's count
    check_pat_messages((5, 393216), 12, 96 << 10, 512 << 10)
    assert "Correct" in capsys.readouterr().out


def test_pat_messages_wrong():
    assert_not_answered(check_pat_messages, None, 12, 96 << 10, 512 << 10)
    with pytest.raises(AssertionError, match="largest message of 524288 bytes is too high"):
        check_pat_messages((4, 512 << 10), 12, 96 << 10, 512 << 10)  # filled the slot: 5.3 blocks
    with pytest.raises(AssertionError, match="4 messages per rank is too low"):
        check_pat_messages((4, 393216), 12, 96 << 10, 512 << 10)  # ceil(11 / 4), ignoring distances
    with pytest.raises(AssertionError, match="give a pair"):
        check_pat_messages((5,), 12, 96 << 10, 512 << 10)


def test_network_bytes_right_and_wrong(capsys):
    gib, block = 1 << 30, (1 << 30) // 32
    assert network_bytes("reduce_scatter", "hierarchical", 32, 8, gib) == 3 * block
    assert network_bytes("reduce_scatter", "ring", 32, 8, gib) == 31 * block
    check_network_bytes(3 * block, "reduce_scatter", "hierarchical", 32, 8, gib)
    assert "Correct" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="1040187392 bytes is off by more than 10x \\(too high\\)"):
        check_network_bytes(31 * block, "reduce_scatter", "hierarchical", 32, 8, gib)
    assert_not_answered(check_network_bytes, None, "all_gather", "hierarchical", 32, 8, gib)


# --- implement: right answers --------------------------------------------------


def ring_all_gather(output, input):
    r, p = mc.get_rank(), mc.get_world_size()
    c = input.numel()
    for s in range(p - 1):
        if s == 0:
            output[r * c : (r + 1) * c].copy_(input)
        a, b = (r - s) % p, (r - s - 1) % p
        req = mc.isend(output[a * c : (a + 1) * c], (r + 1) % p)
        mc.recv(output[b * c : (b + 1) * c], (r - 1) % p)
        req.wait()
    if p == 1:
        output.copy_(input)


def binomial_broadcast(tensor, src):
    r, p = mc.get_rank(), mc.get_world_size()
    v, d = (r - src) % p, 1
    while d < p:
        if v & d:
            mc.recv(tensor, (r - d) % p)
            break
        d <<= 1
    d >>= 1
    while d >= 1:
        if v + d < p:
            mc.send(tensor, (r + d) % p)
        d >>= 1


def bruck_all_gather(output, input, *, blocks=lambda d, p: min(d, p - d)):
    r, p = mc.get_rank(), mc.get_world_size()
    c = input.numel()
    tmp = torch.empty_like(output)
    tmp[:c].copy_(input)
    d = 1
    while d < p:
        k = blocks(d, p)
        req = mc.isend(tmp[: k * c], (r - d) % p)
        mc.recv(tmp[d * c : (d + k) * c], (r + d) % p)
        req.wait()
        d *= 2
    for i in range(p):
        j = (r + i) % p
        output[j * c : (j + 1) * c].copy_(tmp[i * c : (i + 1) * c])


def ring_all_reduce(tensor, *, bounds=lambda n, p: [k * n // p for k in range(p + 1)]):
    r, p = mc.get_rank(), mc.get_world_size()
    b = bounds(tensor.numel(), p)

    def chunk(k):
        k %= p
        return tensor[b[k] : b[k + 1]]

    for s in range(p - 1):
        req = mc.isend(chunk(r - s).clone(), (r + 1) % p)
        incoming = torch.empty_like(chunk(r - s - 1))
        mc.recv(incoming, (r - 1) % p)
        req.wait()
        chunk(r - s - 1).add_(incoming)
    for s in range(p - 1):
        req = mc.isend(chunk(r + 1 - s), (r + 1) % p)
        mc.recv(chunk(r - s), (r - 1) % p)
        req.wait()


def test_right_implementations_pass():
    assert check_collective(ring_all_gather, "all_gather", sends_per_rank=lambda p: p - 1, **SMALL)
    assert check_collective(binomial_broadcast, "broadcast", sends_per_rank=ceil_log2, **SMALL)
    assert check_collective(bruck_all_gather, "all_gather", sends_per_rank=ceil_log2, **SMALL)
    assert check_collective(ring_all_reduce, "all_reduce", sends_per_rank=lambda p: 2 * (p - 1), **SMALL)


# --- implement: plausible wrong answers, and what the checker says --------------


def ring_all_gather_off_by_one(output, input):
    r, p = mc.get_rank(), mc.get_world_size()
    c = input.numel()
    output[r * c : (r + 1) * c].copy_(input)
    for s in range(p - 1):
        a = (r - s - 1) % p  # forwards the block it is about to receive
        req = mc.isend(output[a * c : (a + 1) * c], (r + 1) % p)
        mc.recv(output[a * c : (a + 1) * c], (r - 1) % p)
        req.wait()


def ring_all_gather_send_first(output, input):
    r, p = mc.get_rank(), mc.get_world_size()
    c = input.numel()
    output[r * c : (r + 1) * c].copy_(input)
    for s in range(p - 1):
        a, b = (r - s) % p, (r - s - 1) % p
        mc.send(output[a * c : (a + 1) * c], (r + 1) % p)  # blocking send on every rank first
        mc.recv(output[b * c : (b + 1) * c], (r - 1) % p)


def linear_broadcast(tensor, src):
    if mc.get_rank() == src:
        for q in range(mc.get_world_size()):
            if q != src:
                mc.send(tensor, q)
    else:
        mc.recv(tensor, src)


def whole_buffer_ring(tensor):
    r, p = mc.get_rank(), mc.get_world_size()
    for _ in range(p - 1):  # passes (and adds) the whole, already partly summed, vector
        req = mc.isend(tensor.clone(), (r + 1) % p)
        incoming = torch.empty_like(tensor)
        mc.recv(incoming, (r - 1) % p)
        req.wait()
        tensor.add_(incoming)


def library_all_reduce(tensor):
    mc.all_reduce(tensor)


def test_off_by_one_chunk_is_named():
    with pytest.raises(
        ExerciseFailure, match=r"all_gather, world size 2.*block 1 \(from rank 1\).*never written"
    ):
        check_collective(ring_all_gather_off_by_one, "all_gather", **SMALL)


def test_send_send_ring_deadlocks():
    with pytest.raises(ExerciseFailure, match=r"world size 2.*hangs.*deadlock.*waits to send"):
        check_collective(ring_all_gather_send_first, "all_gather", world_sizes=(2, 3), counts=(1,))


def test_linear_broadcast_sends_too_many_messages():
    with pytest.raises(ExerciseFailure, match=r"world size 4.*rank 0 sent 3 messages.*at most 2 per rank"):
        check_collective(linear_broadcast, "broadcast", sends_per_rank=ceil_log2, **SMALL)


def test_bruck_for_powers_of_two_only_fails_at_three():
    def pow2_bruck(output, input):
        bruck_all_gather(output, input, blocks=lambda d, p: d)  # forgets min(d, p - d)

    with pytest.raises(ExerciseFailure, match=r"world size 3"):
        check_collective(pow2_bruck, "all_gather", **SMALL)


def test_whole_buffer_ring_counts_ranks_twice():
    with pytest.raises(ExerciseFailure, match=r"world size 3.*\(2 times\)"):
        check_collective(whole_buffer_ring, "all_reduce", dtypes=(torch.int64,), **SMALL)


def test_ring_all_reduce_that_drops_the_remainder():
    def even_chunks(tensor):  # every chunk n // p long: the last n % p elements are never reduced
        ring_all_reduce(tensor, bounds=lambda n, p: [k * (n // p) for k in range(p)] + [p * (n // p)])

    with pytest.raises(ExerciseFailure, match=r"missing rank"):
        check_collective(even_chunks, "all_reduce", dtypes=(torch.int64,), **SMALL)


def test_using_the_library_is_refused():
    with pytest.raises(ExerciseFailure, match="write it from send/recv"):
        check_collective(library_all_reduce, "all_reduce", **SMALL)
