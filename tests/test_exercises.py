"""The exercise checker: right answers pass, and each kind of wrong answer
fails with a message that names the case, the rank and what is wrong."""

from __future__ import annotations

import pytest
import torch

import mycollectives as mc
from mycollectives.book import exercises
from mycollectives.book.exercises import ExerciseFailure, check_collective
from mycollectives.collectives import record

pytestmark = pytest.mark.timeout(120)
SMALL = {"world_sizes": (1, 2, 3, 5), "counts": (0, 1, 7)}


# --- right answers -----------------------------------------------------------


def naive_broadcast(tensor, src):
    if mc.get_rank() == src:
        for r in range(mc.get_world_size()):
            if r != src:
                mc.send(tensor, r)
    else:
        mc.recv(tensor, src)


def ring_all_gather(output, input):
    p, r = mc.get_world_size(), mc.get_rank()
    blocks = output.chunk(p) if input.numel() else [output[:0]] * p
    blocks[r].copy_(input)
    for step in range(p - 1):
        send_b, recv_b = blocks[(r - step) % p], blocks[(r - step - 1) % p]
        reqs = [mc.isend(send_b.clone(), (r + 1) % p), mc.irecv(recv_b, (r - 1) % p)]
        for q in reqs:
            q.wait()


def ring_all_reduce(tensor):
    p, r = mc.get_world_size(), mc.get_rank()
    chunks = torch.tensor_split(tensor, p)
    for step in range(p - 1):  # reduce-scatter
        s, d = chunks[(r - step) % p], chunks[(r - step - 1) % p]
        tmp = torch.empty_like(d)
        reqs = [mc.isend(s.clone(), (r + 1) % p), mc.irecv(tmp, (r - 1) % p)]
        for q in reqs:
            q.wait()
        d += tmp
    for step in range(p - 1):  # all-gather
        s, d = chunks[(r + 1 - step) % p], chunks[(r - step) % p]
        reqs = [mc.isend(s.clone(), (r + 1) % p), mc.irecv(d, (r - 1) % p)]
        for q in reqs:
            q.wait()


def dissemination_barrier():
    p, r = mc.get_world_size(), mc.get_rank()
    d = 1
    while d < p:
        token = torch.zeros(1)
        reqs = [mc.isend(token, (r + d) % p), mc.irecv(torch.empty(1), (r - d) % p)]
        for q in reqs:
            q.wait()
        d *= 2


@pytest.mark.parametrize(
    "fn, collective",
    [
        (naive_broadcast, "broadcast"),
        (ring_all_gather, "all_gather"),
        (ring_all_reduce, "all_reduce"),
        (dissemination_barrier, "barrier"),
    ],
)
def test_right_answers_pass(fn, collective, capsys):
    n = check_collective(fn, collective, **SMALL)
    assert n > 0 and "Correct" in capsys.readouterr().out


@pytest.mark.parametrize("collective", exercises.COLLECTIVES)
def test_the_package_own_algorithms_pass_when_allowed(collective):
    c = record(collective)

    def fn(*args):  # the exercise's arguments: (tensor[, root]) in place, else (output, input[, root])
        *tensors, root = args if c.rooted else (*args, 0)
        out, inp = (tensors[0], tensors[-1]) if tensors else (None, None)
        c.call(mc, inp, out, mc.ReduceOp.SUM if c.reducing else None, root, None, mc.get_rank())

    assert check_collective(fn, collective, world_sizes=(1, 3, 4), counts=(0, 5), allow_collectives=True) > 0


# --- wrong answers -----------------------------------------------------------


def test_an_off_by_one_ring_names_rank_block_and_source():
    def off_by_one(output, input):
        p, r = mc.get_world_size(), mc.get_rank()
        blocks = output.chunk(p)
        blocks[r].copy_(input)
        for step in range(p - 1):
            s, d = blocks[(r - step) % p], blocks[(r - step - 2) % p]  # wrong slot
            reqs = [mc.isend(s.clone(), (r + 1) % p), mc.irecv(d, (r - 1) % p)]
            for q in reqs:
                q.wait()

    with pytest.raises(ExerciseFailure) as e:
        check_collective(off_by_one, "all_gather", world_sizes=(3,), counts=(2,))
    msg = str(e.value)
    assert "world size 3" in msg and "count 2" in msg and "rank 0" in msg
    assert (
        "block" in msg and "rank 2's input element" in msg and "never written" not in msg or "expected" in msg
    )


def test_blocking_sends_around_a_ring_are_a_deadlock_that_names_everyone():
    def blocking_ring(output, input):
        p, r = mc.get_world_size(), mc.get_rank()
        blocks = output.chunk(p)
        blocks[r].copy_(input)
        for step in range(p - 1):
            mc.send(blocks[(r - step) % p], (r + 1) % p)  # everyone sends first
            mc.recv(blocks[(r - step - 1) % p], (r - 1) % p)

    with pytest.raises(ExerciseFailure) as e:
        check_collective(blocking_ring, "all_gather", world_sizes=(3,), counts=(4,), dtypes=(torch.int64,))
    msg = str(e.value)
    assert "deadlock" in msg
    for r in range(3):
        assert f"rank {r} waits to send to rank {(r + 1) % 3}" in msg


def test_a_reduction_that_misses_a_rank_says_which():
    def forgets_last(tensor):
        p, r = mc.get_world_size(), mc.get_rank()
        if r == 0:
            tmp = torch.empty_like(tensor)
            for src in range(1, p - 1):  # forgets rank p-1
                mc.recv(tmp, src)
                tensor += tmp
            for dst in range(1, p):
                mc.send(tensor, dst)
        else:
            if r != p - 1:
                mc.send(tensor, 0)
            mc.recv(tensor, 0)

    with pytest.raises(ExerciseFailure) as e:
        check_collective(forgets_last, "all_reduce", world_sizes=(3,), counts=(5,), dtypes=(torch.int64,))
    msg = str(e.value)
    assert "missing rank 2" in msg and "rank 0" in msg and "chunk" in msg


def test_a_receive_that_never_comes_is_a_hang_not_a_stall():
    def waits_for_nobody(tensor, src):
        if mc.get_rank() != src:
            mc.recv(tensor, src)  # the root never sends

    with pytest.raises(ExerciseFailure) as e:
        check_collective(waits_for_nobody, "broadcast", world_sizes=(2,), counts=(1,), timeout=30)
    assert "hangs" in str(e.value) and "already returned" in str(e.value)


def test_calling_the_package_collective_is_refused():
    def cheat(output, input):
        mc.all_gather_into_tensor(output, input)

    with pytest.raises(ExerciseFailure, match="write it from send/recv"):
        check_collective(cheat, "all_gather", world_sizes=(2,), counts=(1,))


def test_too_many_messages_for_the_algorithm_asked_for():
    with pytest.raises(ExerciseFailure, match="rank 0 sent 3 messages"):
        check_collective(
            naive_broadcast, "broadcast", world_sizes=(4,), counts=(1,), sends_per_rank=lambda p: 2
        )


def test_a_barrier_that_does_not_wait_is_caught():
    with pytest.raises(ExerciseFailure, match="left at .* before rank"):
        check_collective(lambda: None, "barrier", world_sizes=(3,))


def test_a_raising_rank_and_a_changed_input_are_reported():
    def raises(tensor):
        if mc.get_rank() == 1:
            raise RuntimeError("boom")

    with pytest.raises(ExerciseFailure, match="rank 1 raised RuntimeError: boom"):
        check_collective(raises, "all_reduce", world_sizes=(2,), counts=(1,))

    def scribbles(output, input):
        ring_all_gather(output, input)
        input.zero_()

    with pytest.raises(ExerciseFailure, match="changed its input"):
        check_collective(scribbles, "all_gather", world_sizes=(2,), counts=(3,))


def test_unknown_collective_is_a_clear_error():
    with pytest.raises(ValueError, match="collective must be one of"):
        check_collective(naive_broadcast, "allreduce")


def linear_barrier():
    """Everyone reports to rank 0, which then releases everyone: a correct barrier,
    but rank 0 sends p - 1 messages, not the dissemination barrier's log2 p."""
    p, r = mc.get_world_size(), mc.get_rank()
    token = torch.zeros(1)
    if r == 0:
        for q in range(1, p):
            mc.recv(token, q)
        for q in range(1, p):
            mc.send(token, q)
    else:
        mc.send(token, 0)
        mc.recv(token, 0)


def ceil_log2(p):
    return max(0, (p - 1).bit_length())


def test_the_barrier_rules_hold_a_linear_barrier_fails():
    with pytest.raises(ExerciseFailure, match="rank 0 sent 3 messages"):
        check_collective(linear_barrier, "barrier", world_sizes=(4,), sends_per_rank=ceil_log2)


def test_the_barrier_rules_hold_the_package_barrier_fails():
    with pytest.raises(ExerciseFailure, match="write it from send/recv"):
        check_collective(lambda: mc.barrier(), "barrier", world_sizes=(3,), sends_per_rank=ceil_log2)


def test_the_dissemination_barrier_passes_the_rules(capsys):
    check_collective(dissemination_barrier, "barrier", world_sizes=(1, 2, 3, 5, 8), sends_per_rank=ceil_log2)
    assert "Correct" in capsys.readouterr().out


def test_placeholder_code_is_not_answered_yet(capsys):
    def placeholder(tensor):
        raise NotImplementedError  # your code here

    assert check_collective(placeholder, "all_reduce", **SMALL) is None
    out = capsys.readouterr().out
    assert "not answered yet" in out and "Correct" not in out
    assert check_collective(None, "all_reduce") is None
    assert "not answered yet" in capsys.readouterr().out
