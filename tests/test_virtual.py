"""The virtual cluster (mycollectives.virtual): agreement with the round simulator, determinism,
streams and overlap, stragglers, compute by FLOPs and by torch ops, errors, and the book's lessons."""

from __future__ import annotations

import pytest
import torch

import mycollectives as mc
from mycollectives import virtual
from mycollectives.errors import DeadlockError
from mycollectives.sim import simulate
from mycollectives.topology import cluster

T = 120  # wall-clock guard of every run, seconds
MiB = 1 << 20


def _timed(rank, nbytes, algorithm):
    x = torch.full((nbytes // 4,), float(rank + 1))
    t0 = virtual.clock()
    mc.all_reduce(x, algorithm=algorithm, channels=1)  # the round simulator's schedule, on one channel
    return virtual.clock() - t0, x[:2].tolist()


@pytest.mark.parametrize("nodes", [1, 2, 4])
@pytest.mark.parametrize("algorithm", ["ring", "double_binary_tree", "recursive_doubling", "hierarchical"])
@pytest.mark.parametrize("nbytes", [64 << 10, 4 * MiB])
def test_all_reduce_agrees_with_the_round_simulator(nodes, algorithm, nbytes):
    run = virtual.run(_timed, "dgx_h100", nodes, (nbytes, algorithm), timeout=T, compute=virtual.NETWORK_ONLY)
    p = run.topology.num_gpus
    assert all(r[1] == [p * (p + 1) / 2] * 2 for r in run.results)  # computed for real
    sim = simulate("all_reduce", algorithm, nbytes, run.topology, local_size=8).time_s
    # two engines, not one answer: with no barrier between rounds a rank may finish earlier than the
    # round simulator says (a tree's pipelined segments), never much later
    assert 0.9 * sim <= max(r[0] for r in run.results) <= 1.02 * sim


def test_64_mib_agrees_and_the_validation_function_reports_it():
    rows = virtual.agreement("all_reduce", ("ring", "double_binary_tree"), (64 * MiB,), (2,), timeout=T)
    assert [r["algorithm"] for r in rows] == ["ring", "double_binary_tree"]
    for r in rows:
        assert r["ratio"] == pytest.approx(1.0, abs=0.02), r


@pytest.mark.parametrize("collective", ["all_gather", "reduce_scatter", "broadcast"])
def test_other_collectives_agree(collective):
    algs = mc.algorithms(collective)[:3]
    for r in virtual.agreement(collective, algs, (1 * MiB,), (2,), timeout=T):
        assert r["ratio"] == pytest.approx(1.0, abs=0.02), r


def _mixed(rank):
    x = torch.arange(1 << 14, dtype=torch.float32) * (rank + 1)
    y = x @ torch.ones(1 << 14, 8)
    mc.all_reduce(y)
    work = mc.all_reduce(x, async_op=True)
    virtual.compute(flops=1e9 * (rank + 1))
    work.wait()
    return virtual.clock(), y.sum().item(), x[-1].item()


def test_two_runs_are_identical_bit_for_bit():
    a = virtual.run(_mixed, "dgx_a100", 2, timeout=T)
    b = virtual.run(_mixed, "dgx_a100", 2, timeout=T)
    assert a.results == b.results and a.elapsed == b.elapsed and a.clocks == b.clocks


def _overlap(rank, nbytes, seconds, overlap):
    x = torch.ones(nbytes // 4)
    t0 = virtual.clock()
    if overlap:
        work = mc.all_reduce(x, async_op=True)
        virtual.compute(seconds=seconds)
        work.wait()
    else:
        mc.all_reduce(x)
        virtual.compute(seconds=seconds)
    return virtual.clock() - t0


def test_an_async_all_reduce_overlaps_with_compute():
    comm = max(virtual.run(_overlap, "dgx_h100", 1, (16 * MiB, 0.0, False), timeout=T).results)
    serial = max(virtual.run(_overlap, "dgx_h100", 1, (16 * MiB, comm, False), timeout=T).results)
    both = max(virtual.run(_overlap, "dgx_h100", 1, (16 * MiB, comm, True), timeout=T).results)
    assert serial == pytest.approx(2 * comm, rel=1e-6)
    assert both == pytest.approx(comm, rel=0.01)  # max, not sum


def _step(rank, seconds):
    virtual.compute(seconds=seconds)
    mc.all_reduce(torch.ones(1024))
    return virtual.clock()


def test_a_straggler_delays_everyone():
    fast = virtual.run(_step, "dgx_h100", 1, (1e-3,), timeout=T, compute=virtual.NETWORK_ONLY)
    slow = virtual.run(_step, "dgx_h100", 1, (1e-3,), slow={3: 2.0}, timeout=T, compute=virtual.NETWORK_ONLY)
    assert slow.elapsed - fast.elapsed == pytest.approx(1e-3, rel=1e-6)
    assert min(slow.clocks) > 2e-3  # every rank waited for rank 3 in the all-reduce


def test_a_degraded_link_slows_the_ring():
    base = virtual.run(_timed, "dgx_h100", 1, (16 * MiB, "ring"), timeout=T)
    worse = virtual.run(
        _timed, "dgx_h100", 1, (16 * MiB, "ring"), degrade={(3, "n0.nvswitch"): 4.0}, timeout=T
    )
    assert max(r[0] for r in worse.results) > 2 * max(r[0] for r in base.results)
    pair = virtual.run(_timed, "dgx_h100", 1, (16 * MiB, "ring"), degrade={(2, 3): 4.0}, timeout=T)
    assert max(r[0] for r in pair.results) > 2 * max(r[0] for r in base.results)


def _matmul(rank, m, n, k, dtype=torch.bfloat16, device="cpu"):
    a, b = torch.ones(m, k, dtype=dtype, device=device), torch.ones(k, n, dtype=dtype, device=device)
    t0 = virtual.clock()
    a @ b
    t1 = virtual.clock()
    virtual.compute(flops=2 * m * n * k)
    return t1 - t0, virtual.clock() - t1


def test_compute_is_charged_by_flops_and_by_torch_ops():
    m, n, k = 2048, 2048, 4096  # compute-bound on an H100 (intensity above its ridge point), even in float32
    # on the meta device: charged by its shapes, as a CPU would take a minute to multiply them in bfloat16
    args = (m, n, k, torch.bfloat16, "meta")
    run = virtual.run(_matmul, "dgx_h100", 1, args, world_size=1, timeout=T, compute="roofline")
    peak = run.roofline.peak_flops
    by_op, by_flops = run.results[0]
    assert by_op == pytest.approx(2 * m * n * k / peak, rel=1e-9)
    assert by_flops == pytest.approx(by_op, rel=1e-9)
    assert run.flops[0] == 2 * m * n * k


def test_float32_ops_are_charged_at_the_fp32_rate():
    m, n, k = 1024, 1024, 2048
    run = virtual.run(
        _matmul, "dgx_h100", 1, (m, n, k, torch.float32), world_size=1, timeout=T, compute="roofline"
    )
    fp32 = virtual.roofline_of(virtual.topology_of("dgx_h100", 1, None), torch.float32)
    by_op, by_flops = run.results[0]
    assert fp32.peak_flops < run.roofline.peak_flops / 10  # H100: 67 against 989 TFLOP/s
    assert by_op == pytest.approx(2 * m * n * k / fp32.peak_flops, rel=1e-9)
    assert by_flops == pytest.approx(2 * m * n * k / run.roofline.peak_flops, rel=1e-9)


def _memory_bound(rank):
    x = torch.ones(1 << 22)
    t0 = virtual.clock()
    x.add_(1.0)  # reads and writes 16 MiB
    return virtual.clock() - t0


def test_an_elementwise_op_is_charged_by_bytes():
    run = virtual.run(_memory_bound, "dgx_a100", 1, world_size=1, timeout=T, compute="roofline")
    assert run.results[0] == pytest.approx(2 * 4 * (1 << 22) / run.roofline.bandwidth, rel=1e-9)


def _deadlock(rank):
    x = torch.ones(4)
    if rank == 0:
        mc.recv(x, src=1)
    return rank


def test_a_deadlock_names_the_ranks():
    with pytest.raises(DeadlockError, match="rank 0 waits to receive from rank 1"):
        virtual.run(_deadlock, "dgx_h100", 1, world_size=2, timeout=T)


def _fails(rank):
    if rank == 2:
        raise RuntimeError("boom")
    mc.all_reduce(torch.ones(4))


def test_an_exception_in_a_rank_is_re_raised_naming_it():
    with pytest.raises(RuntimeError, match="rank 2 of a virtual run: boom") as info:
        virtual.run(_fails, "dgx_h100", 1, world_size=4, timeout=T)
    assert any("rank 2" in n for n in info.value.__notes__)


@pytest.mark.parametrize(
    "kwargs, err",
    [
        ({"cluster": "dgx_h999"}, ValueError),
        ({"cluster": "dgx_h100", "nodes": 0}, ValueError),
        ({"cluster": "dgx_h100", "slow": {99: 2.0}}, ValueError),
        ({"cluster": "dgx_h100", "slow": {0: -1.0}}, ValueError),
        ({"cluster": "dgx_h100", "degrade": {(0, 999): 2.0}}, ValueError),
        ({"cluster": "dgx_h100", "degrade": {(0, 1): 0.5}}, ValueError),
        ({"cluster": "dgx_h100", "world_size": 9}, ValueError),
        ({"cluster": "dgx_h100", "setup": [3]}, TypeError),
        ({"cluster": "dgx_h100", "timeout": -1}, ValueError),
        ({"cluster": cluster("dgx_h100", nodes=2), "nodes": 2}, ValueError),
    ],
)
def test_bad_arguments_are_refused(kwargs, err):
    with pytest.raises(err, match="virtual.run"):
        virtual.run(lambda rank: rank, **kwargs)


def test_compute_refuses_bad_charges_and_outside_a_run():
    with pytest.raises(RuntimeError, match="virtual run"):
        virtual.compute(seconds=1.0)
    with pytest.raises(ValueError, match="rank 0: argument .seconds. must be a finite number >= 0"):
        virtual.run(lambda rank: virtual.compute(seconds=-1.0), world_size=1, timeout=T)


def test_setup_hooks_and_subgroups():
    seen = []

    def hook(rank, world_size):
        seen.append((rank, world_size))

    def fn(rank):
        sub = virtual.transport().subgroup([1, 3])
        if sub is None:
            return None
        x = torch.tensor([float(rank)])
        mc.all_reduce(x, group=sub)
        y = torch.tensor([float(rank)])
        if sub.rank == 0:
            mc.send(y, dst=3, group=sub)  # world rank 3 is the subgroup's rank 1
        else:
            mc.recv(y, group_src=0, group=sub)
        return sub.rank, sub.world_size, x.item(), y.item()

    run = virtual.run(fn, world_size=4, setup=[hook], timeout=T)
    assert sorted(seen) == [(r, 4) for r in range(4)]
    assert run.results == [None, (0, 2, 4.0, 1.0), None, (1, 2, 4.0, 1.0)]


# --- the book's lessons, on the virtual cluster ---------------------------------


def _alg_time(nbytes, algorithm, nodes=2, **kw):
    run = virtual.run(
        _timed, "dgx_h100", nodes, (nbytes, algorithm), timeout=T, compute=virtual.NETWORK_ONLY, **kw
    )
    return max(r[0] for r in run.results)


def test_ring_beats_tree_at_64_mib_and_tree_beats_ring_at_64_kib():
    # one NIC per node: the package's one ring crosses one NIC each way (NCCL would run a ring per NIC)
    one = {"nics_per_node": 1}
    assert _alg_time(64 << 10, "double_binary_tree", **one) < _alg_time(64 << 10, "ring", **one)
    assert _alg_time(64 * MiB, "ring", **one) < _alg_time(64 * MiB, "double_binary_tree", **one)


def test_hierarchical_beats_flat_across_nodes():
    assert _alg_time(16 * MiB, "hierarchical") < _alg_time(16 * MiB, "ring")


def _naive(rank, nbytes, naive):
    x = torch.ones(nbytes // 4)
    t0 = virtual.clock()
    if not naive:
        mc.all_reduce(x, algorithm="ring")
        return virtual.clock() - t0
    p = virtual.transport().world_size
    if rank == 0:  # gather to rank 0, add, send back: chapter 2's naive all-reduce
        buf = torch.empty_like(x)
        for src in range(1, p):
            mc.recv(buf, src=src)
            x += buf
        for dst in range(1, p):
            mc.send(x, dst=dst)
    else:
        mc.send(x, dst=0)
        mc.recv(x, src=0)
    return virtual.clock() - t0


def test_the_library_ring_beats_naive_send_recv_at_large_sizes():
    ring = virtual.run(_naive, "dgx_h100", 1, (16 * MiB, False), timeout=T)
    naive = virtual.run(_naive, "dgx_h100", 1, (16 * MiB, True), timeout=T)
    assert max(ring.results) * 3 < max(naive.results)


def _p2p(rank, overlap):
    x = torch.full((4 << 20,), float(rank))  # 16 MiB
    t0 = virtual.clock()
    if rank == 0:
        work = mc.isend(x, dst=1)
        if overlap:
            virtual.compute(seconds=1e-4)
        work.wait()
    else:
        mc.recv(x, src=0)
    return virtual.clock() - t0, x[-1].item()


def test_isend_overlaps_with_compute_and_recv_gets_the_data():
    alone = virtual.run(_p2p, "dgx_h100", 1, (False,), world_size=2, timeout=T)
    both = virtual.run(_p2p, "dgx_h100", 1, (True,), world_size=2, timeout=T)
    transfer = alone.results[1][0]
    assert alone.results[1][1] == 0.0 and transfer > 1e-5
    assert both.results[0][0] == pytest.approx(max(transfer, 1e-4), rel=1e-6)


def test_the_wall_clock_guard_names_the_running_rank():
    import time

    with pytest.raises(TimeoutError, match="rank 0"):
        virtual.run(lambda rank: time.sleep(3), world_size=1, timeout=1)


def test_explicit_charges_use_the_roofline_and_the_straggler_factor():
    def fn(rank):
        a = virtual.compute(flops=1e12)
        b = virtual.compute(bytes=1e9)
        c = virtual.compute(flops=1e12, bytes=1e12)
        return a, b, c

    run = virtual.run(fn, "dgx_b200", world_size=2, slow={1: 3.0}, timeout=T, compute="roofline")
    roof = run.roofline
    assert roof.peak_flops == virtual.GPU_ROOFLINES["B200"].peak_flops
    assert run.results[0] == pytest.approx(
        (1e12 / roof.peak_flops, 1e9 / roof.bandwidth, 1e12 / roof.bandwidth)
    )
    assert run.results[1] == pytest.approx(tuple(3 * x for x in run.results[0]))
    assert run.elapsed == pytest.approx(3 * sum(run.results[0]))


def _pairs(rank, senders):
    x = torch.ones(4 << 20)  # 16 MiB
    t0 = virtual.clock()
    if rank in senders:
        mc.send(x, dst=rank + 8)
    elif rank - 8 in senders:
        mc.recv(x, src=rank - 8)
    return virtual.clock() - t0


def test_concurrent_transfers_share_a_nic():
    one = {"nics_per_node": 1}
    alone = virtual.run(_pairs, "dgx_h100", 2, ({0},), timeout=T, **one).results[8]
    shared = virtual.run(_pairs, "dgx_h100", 2, ({0, 1},), timeout=T, **one).results[8]
    assert shared > 1.8 * alone - 1e-5  # two flows through one NIC: each at about half the rate


def test_bucketed_overlap_hides_at_least_half_of_the_all_reduce_time():
    from mycollectives.book.virtual_lesson import bucketed_step

    args = (4, 4 * MiB, 1e-4)  # each piece of backward outlasts one bucket's all-reduce
    comm = max(virtual.run(bucketed_step, "dgx_h100", 1, (4, 4 * MiB, 0.0, False), timeout=T).results)
    serial = max(virtual.run(bucketed_step, "dgx_h100", 1, (*args, False), timeout=T).results)
    both = max(virtual.run(bucketed_step, "dgx_h100", 1, (*args, True), timeout=T).results)
    assert serial - both >= 0.5 * comm


def _pipeline(rank, micro, t):
    p = virtual.transport().world_size
    act = torch.zeros(1024)
    sends = []
    for _ in range(micro):  # all forwards, then all backwards (GPipe)
        if rank > 0:
            mc.recv(act, src=rank - 1)
        virtual.compute(seconds=t)
        if rank < p - 1:
            sends.append(mc.isend(act.clone(), dst=rank + 1))
    for _ in range(micro):
        if rank < p - 1:
            mc.recv(act, src=rank + 1)
        virtual.compute(seconds=2 * t)
        if rank > 0:
            sends.append(mc.isend(act.clone(), dst=rank - 1))
    for w in sends:
        w.wait()
    return virtual.clock()


@pytest.mark.parametrize("micro", [4, 16])
def test_the_pipeline_bubble_is_p_minus_1_over_m_plus_p_minus_1(micro):
    p, t = 4, 1e-3
    run = virtual.run(_pipeline, "dgx_h100", 1, (micro, t), world_size=p, timeout=T)
    bubble = 1 - micro * 3 * t / run.elapsed
    assert bubble == pytest.approx((p - 1) / (micro + p - 1), rel=0.05)


def _polls(rank):
    x = torch.ones(1 << 20)
    work = mc.all_reduce(x, async_op=True)
    polls = 0
    while not work.is_completed():  # each unsuccessful poll lets virtual time pass
        polls += 1
    return polls, x[0].item()


def test_a_polling_loop_terminates():
    run = virtual.run(_polls, "dgx_h100", 1, timeout=T)
    assert all(r[1] == 8.0 and r[0] > 0 for r in run.results)


def _future(rank):
    x = torch.ones(1 << 16)
    fut = mc.all_reduce(x, async_op=True).get_future()
    doubled = fut.then(lambda f: f.value()[0] * 2)  # as a DDP communication hook chains its work
    return fut.wait()[0][0].item(), doubled.wait()[0].item()


def test_a_works_future_waits_in_virtual_time_and_chains():
    assert virtual.run(_future, world_size=4, timeout=T).results == [(4.0, 8.0)] * 4


def test_the_pages_exercise_check_accepts_the_pipeline_answer_and_rejects_the_sum(capsys):
    from mycollectives.book.virtual_lesson import check_step_time

    nbytes, t = 1 * MiB, 1e-5
    c = simulate("all_reduce", "ring", nbytes, cluster("dgx_h100", nodes=1)).time_s
    end = 0.0
    for k in range(1, 5):
        end = max(k * t, end) + c
    check_step_time(end, nbytes=nbytes, seconds=t)
    assert "Correct" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="step time"):
        check_step_time(4 * (t + c), nbytes=nbytes, seconds=t)
    capsys.readouterr()
    check_step_time(None, nbytes=nbytes, seconds=t)
    out = capsys.readouterr().out
    assert out.startswith("not answered yet") and "Correct" not in out


def _marked(rank):
    t0 = virtual.clock()
    with torch.profiler.record_function("a marker, as DDP's forward opens one"):
        pass
    marker = virtual.clock() - t0
    torch.ones(4).add_(1)
    return marker, virtual.clock() - t0


def test_profiler_markers_cost_nothing_and_kernels_still_do():
    ((marker, total),) = virtual.run(_marked, world_size=1, timeout=T).results
    assert marker == 0.0 and total > 0.0
