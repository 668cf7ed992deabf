"""Symmetric memory on the virtual cluster (mycollectives/virtual/heap.py): collectives on the heap run
as loads, give the message path's results, and are priced by the same link model: the same flows after
the same round latencies, plus the signal pads' barriers, each one NVLink step (every time here is virtual)."""

from __future__ import annotations

import functools

import pytest
import torch

import mycollectives as mc
from mycollectives import virtual
from mycollectives.algorithms import schedule_for
from mycollectives.errors import DeadlockError
from mycollectives.loadstore import reads
from mycollectives.topology import PROTOCOLS
from mycollectives.topology.graph import NVLINK
from mycollectives.transport import TransportDeadlock

T = 120  # wall-clock guard of every run, seconds
BARRIER = PROTOCOLS["simple"].step_latency[NVLINK]  # one barrier on a DGX node: an NVLink step


def _call(rank, numel, algorithm, heap):
    if heap:
        x = mc.symmetric.empty(numel)
        h = mc.symmetric.rendezvous(x)
    else:
        x, h = torch.empty(numel), None
    x.copy_(torch.arange(numel) % 97 + rank)  # small integers: every order of the sum is exact
    before = h.barriers if h is not None else 0
    t0 = virtual.clock()
    mc.all_reduce(x, algorithm=algorithm, channels=1)  # one channel: the same flows, posted in one order
    dt = virtual.clock() - t0
    return dt, (h.barriers - before) if h is not None else 0, x.clone()


@functools.cache
def _run(p: int, algorithm: str, nbytes: int, heap: bool, compute="achieved"):
    args = (nbytes // 4, algorithm, heap)
    return virtual.run(_call, "dgx_h100", world_size=p, args=args, timeout=T, compute=compute)


CASES = [(p, a, n) for p in (4, 8) for a in ("ring", "direct", "one_shot") for n in (16 << 10, 4 << 20)]


@pytest.mark.timeout(300)
@pytest.mark.parametrize(("p", "algorithm", "nbytes"), CASES)
def test_heap_all_reduce_gives_the_sum_and_the_message_path_time_plus_its_barriers(p, algorithm, nbytes):
    assert "one_shot" in mc.algorithms("all_reduce")
    heap, msg = _run(p, algorithm, nbytes, True), _run(p, algorithm, nbytes, False)
    numel = nbytes // 4
    want = (torch.arange(numel) % 97) * p + p * (p - 1) // 2
    for r in range(p):
        assert torch.equal(heap.results[r][2], want)
        assert torch.equal(heap.results[r][2], msg.results[r][2])
    schedule = schedule_for("all_reduce", algorithm, p, count=numel)
    rounds = len(schedule.rounds)
    assert reads(schedule, 0)[-1][1] == (algorithm == "one_shot")  # only one-shot ends with late writes
    for r in range(p):
        (dt, barriers, _), (dt_msg, _, _) = heap.results[r], msg.results[r]
        assert dt > 0
        # the same bytes on the same links after the same round latencies; loads pay no other
        # per-message cost, so the heap is slower by its barriers alone: one before each round but
        # the first (the argument check's met there), one per round with late writes, and one at
        # the end unless the last round's late writes already took it (one-shot)
        late = [has_late for _, has_late in reads(schedule, r)]
        assert barriers == rounds - late[-1] + sum(late)
        assert dt == pytest.approx(dt_msg + barriers * BARRIER, rel=1e-9, abs=1e-12)


@pytest.mark.timeout(300)
def test_heap_loads_are_deterministic():
    a = virtual.run(_call, "dgx_h100", world_size=8, args=((4 << 20) // 4, "ring", True), timeout=T)
    b = virtual.run(_call, "dgx_h100", world_size=8, args=((4 << 20) // 4, "ring", True), timeout=T)
    assert [r[:2] for r in a.results] == [r[:2] for r in b.results]
    assert a.elapsed == b.elapsed and a.clocks == b.clocks
    assert all(torch.equal(x[2], y[2]) for x, y in zip(a.results, b.results))


@pytest.mark.timeout(300)
def test_one_shot_beats_ring_on_the_heap_when_small_and_loses_when_large():
    # one-shot: one round, each GPU loads (p - 1) vectors; ring: 2 (p - 1) rounds of n / p each.
    # Small: latency counts, and one round beats 14. Large: bytes count, and 7 n beats 1.75 n.
    small = {a: _run(8, a, 16 << 10, True).results[0][0] for a in ("ring", "one_shot")}
    large = {a: _run(8, a, 16 << 20, True).results[0][0] for a in ("ring", "one_shot")}
    assert small["one_shot"] < small["ring"] / 2
    assert large["one_shot"] > large["ring"]


@pytest.mark.timeout(300)
def test_one_shot_beats_two_shot_on_the_heap_when_small_and_loses_when_large_beyond_two_ranks():
    # one-shot: one round (and one barrier) loading (p - 1) n bytes per GPU; two-shot: two rounds
    # loading 2 (p - 1) / p n. With the adds free (NETWORK_ONLY: the loads alone), on two GPUs (both
    # load n) one-shot always wins; from four GPUs on, two-shot wins at large sizes (chapter 4b's lesson).
    free = virtual.NETWORK_ONLY
    for p in (2, 4, 8):
        small = {a: _run(p, a, 16 << 10, True, free).results[0][0] for a in ("direct", "one_shot")}
        large = {a: _run(p, a, 16 << 20, True, free).results[0][0] for a in ("direct", "one_shot")}
        assert small["one_shot"] < small["direct"]
        assert (large["one_shot"] > large["direct"]) == (p > 2)


def test_a_rendezvous_across_nodes_is_refused_on_every_rank():
    def fn(rank):
        mc.symmetric.rendezvous(mc.symmetric.empty(16))

    with pytest.raises(ValueError, match="another host; symmetric memory is per host"):
        virtual.run(fn, "dgx_h100", nodes=2, timeout=T)


def test_a_tensor_outside_the_heap_is_refused_on_every_rank():
    def fn(rank):
        t = mc.symmetric.empty(16) if rank else torch.empty(16)
        try:
            mc.symmetric.rendezvous(t)
        except ValueError as e:
            return str(e)

    run = virtual.run(fn, world_size=4, timeout=T)
    assert all("ranks [0] passed a tensor that is not in symmetric memory" in m for m in run.results)


def test_signals_and_barriers_take_virtual_time():
    def fn(rank):
        h = mc.symmetric.rendezvous(mc.symmetric.empty(16))
        virtual.compute(seconds=1e-6 * rank)  # the ranks arrive one after the other
        h.barrier()
        after_barrier = virtual.clock()
        h.put_signal((rank + 1) % 4)
        h.wait_signal((rank - 1) % 4)
        return after_barrier, virtual.clock()

    run = virtual.run(fn, world_size=4, timeout=T)
    meets = {round(r[0], 12) for r in run.results}
    assert len(meets) == 1  # every rank leaves the barrier together: the last's arrival plus a step
    assert run.results[0][0] >= 3e-6 + BARRIER
    for left_barrier, signalled in run.results:  # a flag lands one step after it is raised
        assert signalled == pytest.approx(left_barrier + BARRIER, rel=1e-9)


@pytest.mark.parametrize("wait", ["barrier", "signal", "all_reduce"])
def test_a_wait_that_nothing_ends_is_a_deadlock(wait):
    def fn(rank):
        x = mc.symmetric.empty(16)
        h = mc.symmetric.rendezvous(x)
        if rank == 0:
            return  # never meets the others again
        {"barrier": h.barrier, "signal": lambda: h.wait_signal(0), "all_reduce": lambda: mc.all_reduce(x)}[
            wait
        ]()

    kind = DeadlockError if wait == "all_reduce" else TransportDeadlock
    with pytest.raises(kind, match=r"deadlock at virtual time .*rank\(s\) 0 already returned"):
        virtual.run(fn, world_size=3, timeout=T)
