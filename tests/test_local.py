"""Every algorithm on the local world (threads) against a NumPy oracle.

Hypothesis draws the collective, algorithm, world size, element count, dtype,
op and root; the oracle computes what each rank must hold from all inputs.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch
from cases import DTYPES, REDUCING, ROOTED, VARIANTS, Case, call, compare, ops_for, oracle
from conftest import MENU, local_size_for
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mycollectives as mc

APIS = [(api, a) for c, a in MENU for api in VARIANTS[c]]


def check_local(case: Case) -> None:
    got = mc.run_local(lambda rank: call(case, rank, "mc"), case.p, timeout=30)
    want = oracle(case)
    for rank in range(case.p):
        problem = compare(case, rank, got[rank], want[rank])
        assert problem is None, problem


def options(algorithm: str, p: int) -> tuple:
    if algorithm == "hierarchical":
        return (("local_size", local_size_for(p)),)
    if algorithm in ("chain", "double_binary_tree"):
        return (("segment_bytes", 8),)  # a few elements per segment: real pipelining
    return ()


@st.composite
def cases(draw):
    api, algorithm = draw(st.sampled_from(APIS))
    p = draw(st.integers(1, 9))
    dtype = draw(st.sampled_from(list(DTYPES)))
    op = draw(st.sampled_from(ops_for(dtype))) if api in REDUCING else None
    return Case(
        api, algorithm, p,
        n=draw(st.integers(0, 3 * p + 2)),
        dtype=dtype, op=op,
        root=draw(st.integers(0, p - 1)) if api in ROOTED else 0,
        seed=draw(st.integers(0, 10**6)),
        options=options(algorithm, p),
    )  # fmt: skip


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_random_cases_match_numpy(case):
    check_local(case)


@pytest.mark.parametrize("api,algorithm", APIS)
@pytest.mark.parametrize("p", [1, 2, 3, 4, 5, 8])
def test_each_algorithm_on_awkward_counts(api, algorithm, p):
    for n in sorted({0, 1, max(p - 1, 0), 2 * p + 1}):
        for dtype in ("float32", "int64"):
            op = "SUM" if api in REDUCING else None
            root = p - 1 if api in ROOTED else 0
            check_local(Case(api, algorithm, p, n, dtype, op, root, seed=n, options=options(algorithm, p)))


def test_a_few_mebibytes_with_random_floats():
    for api, algorithm in [
        ("all_reduce", "ring"),
        ("all_reduce", "double_binary_tree"),
        ("broadcast", "chain"),
    ]:
        case = Case(
            api, algorithm, 4, 1 << 20, "float32", "SUM" if api == "all_reduce" else None, random=True
        )
        check_local(case)


def test_every_rank_of_an_all_reduce_gets_bitwise_identical_results():
    for algorithm in mc.algorithms("all_reduce"):

        def fn(rank, algorithm=algorithm):
            t = torch.randn(1000, generator=torch.Generator().manual_seed(rank))
            mc.all_reduce(t, algorithm=algorithm, **dict(options(algorithm, 6)))
            return t

        out = mc.run_local(fn, 6)
        assert all(torch.equal(out[0], t) for t in out), algorithm


def test_reduce_leaves_non_root_tensors_untouched():
    def fn(rank):
        t = torch.full((10,), float(rank))
        mc.reduce(t, dst=2, algorithm="rabenseifner")
        return t

    out = mc.run_local(fn, 5)
    assert torch.all(out[2] == 10)
    assert all(torch.all(out[r] == r) for r in (0, 1, 3, 4))


def test_tensors_of_any_shape_and_torch_reduce_op():
    import torch.distributed as dist

    def fn(rank):
        t = torch.ones(2, 3, 4) * (rank + 1)
        mc.all_reduce(t, op=dist.ReduceOp.MAX)
        out = torch.empty(3, 2, 3, 4)
        mc.all_gather_into_tensor(out, t * rank)
        return t, out

    res = mc.run_local(fn, 3)
    assert torch.all(res[0][0] == 3)
    assert torch.equal(res[1][1][2], torch.full((2, 3, 4), 6.0))


def test_point_to_point_and_async_handles():
    def fn(rank):
        if rank == 0:
            a, b = torch.tensor([1.0, 2.0]), torch.tensor([3.0])
            w = mc.isend(a, 1)
            mc.send(b, 1)
            w.wait()
            return None
        a, b = torch.empty(2), torch.empty(1)
        hb = mc.irecv(a, 0)
        mc.recv(b, 0)
        hb.wait()
        assert mc.all_reduce(torch.ones(1), async_op=True).wait()
        return a.tolist() + b.tolist()

    def peer(rank):
        out = fn(rank)
        if rank == 0:
            mc.all_reduce(torch.ones(1), async_op=True).wait()
        return out

    assert mc.run_local(peer, 2)[1] == [1.0, 2.0, 3.0]


def test_trace_records_every_transfer_with_round_and_slice():
    world = mc.LocalWorld(4)

    def fn(rank):
        mc.all_reduce(torch.ones(8), algorithm="ring", check=False)

    world.run(fn)
    events = [e for e in world.trace if e.collective == "all_reduce"]
    assert len(events) == 2 * 3 * 4  # 2(p-1) rounds, one message per rank
    assert {e.round for e in events} == set(range(6))
    assert all(e.nbytes == 2 * 4 and e.count == 2 and e.buffer == "work" for e in events)
    assert all(e.t_recv is not None and e.t_recv >= e.t_send for e in events)
    first = sorted((e.src, e.dst, e.offset) for e in events if e.round == 0)
    assert first == [(0, 1, 6), (1, 2, 0), (2, 3, 2), (3, 0, 4)]


def test_algorithms_lists_the_menu_without_auto():
    assert mc.algorithms("all_reduce") == mc.algorithms("all_reduce")
    assert "auto" not in mc.algorithms("all_reduce")
    assert mc.algorithms("all_gather_into_tensor") == mc.algorithms("all_gather")
    assert set(mc.algorithms("broadcast")) == {"linear", "binomial", "chain", "scatter_allgather"}
    with pytest.raises(ValueError, match="unknown collective"):
        mc.algorithms("allreduce")


def test_auto_choice_is_in_the_menu():
    from mycollectives import auto

    for c in ("broadcast", "reduce", "all_reduce", "all_gather", "reduce_scatter", "all_to_all"):
        for p in (1, 2, 3, 8, 64):
            for nbytes in (0, 1 << 10, 1 << 24):
                assert auto.choose(c, p, nbytes) in mc.algorithms(c)
    np.testing.assert_equal(len(mc.algorithms("barrier")), 1)


def test_group_ranks_and_default_roots_as_in_torch():
    def fn(rank):
        t = torch.full((2,), float(rank))
        mc.broadcast(t, group_src=2)
        s = torch.empty(1)
        mc.scatter(
            s, [torch.tensor([10.0 + i]) for i in range(3)] if rank == 0 else None
        )  # src defaults to 0
        if rank == 0:
            mc.send(torch.tensor([5.0]), group_dst=1)
        elif rank == 1:
            got = torch.empty(1)
            assert mc.recv(got, group_src=0) == 0 and got.item() == 5.0
        with pytest.raises(ValueError, match="'src' is required"):
            mc.broadcast(t)
        with pytest.raises(ValueError, match="both given"):
            mc.broadcast(t, src=0, group_src=0)
        mc.barrier(None, False, None, __import__("datetime").timedelta(seconds=5))
        return t.tolist() + s.tolist()

    assert mc.run_local(fn, 3) == [[2.0, 2.0, 10.0], [2.0, 2.0, 11.0], [2.0, 2.0, 12.0]]


def test_tensors_that_require_grad_as_in_ddp_start_up():
    def fn(rank):
        torch.manual_seed(rank)
        layer = torch.nn.Linear(3, 2)
        for param in layer.parameters():  # DDP broadcasts rank 0's parameters
            mc.broadcast(param, src=0)
        out = layer(torch.ones(1, 3)).sum()
        out.backward()
        mc.all_reduce(layer.weight.grad, op=mc.ReduceOp.AVG)
        return layer.weight.detach().clone(), layer.weight.requires_grad

    res = mc.run_local(fn, 3)
    assert all(torch.equal(res[0][0], w) and grad for w, grad in res)


def test_blocking_sends_around_a_ring_deadlock_only_above_the_eager_limit():
    def shift(rank, n):
        p = mc.get_world_size()
        out = torch.empty(n)
        mc.send(torch.full((n,), float(rank)), (rank + 1) % p)
        mc.recv(out, (rank - 1) % p)
        return out[0].item()

    assert mc.LocalWorld(3, eager_bytes=64).run(shift, 4) == [2.0, 0.0, 1.0]  # 16 bytes: buffered
    t0 = time.monotonic()
    res = mc.LocalWorld(3, eager_bytes=64, timeout=30).run(shift, 64, return_exceptions=True)
    assert time.monotonic() - t0 < 5, "the deadlock was waited out, not detected"
    assert all(isinstance(e, mc.DeadlockError) for e in res), res
    assert (
        "rank 0 waits to send to rank 1; rank 1 waits to send to rank 2; rank 2 waits to send to rank 0"
        in str(res[0])
    )

    def nonblocking(rank, n):
        p = mc.get_world_size()
        out = torch.empty(n)
        works = [mc.isend(torch.full((n,), float(rank)), (rank + 1) % p), mc.irecv(out, (rank - 1) % p)]
        for w in works:  # waiting on the send first is fine once the receive is posted
            w.wait()
        return out[0].item()

    assert mc.LocalWorld(3, eager_bytes=0).run(nonblocking, 64) == [2.0, 0.0, 1.0]


@pytest.mark.parametrize("algorithm", mc.algorithms("scatter"))
@pytest.mark.parametrize("p", [1, 2, 3, 4, 6])
def test_scatter_and_gather_in_place_leave_inputs_untouched(algorithm, p):
    """Scatter reads the root's list in place and receives into ``tensor``;
    gather sends from ``tensor`` and receives into the root's list. Inputs
    must come back unchanged; a list naming one tensor twice falls back to copies."""
    n, root = 5, p - 1

    def source(i):
        return torch.arange(n, dtype=torch.float32) + 10 * (i if p < 3 or i != 1 else 0)

    def scatter(rank):
        src = [source(i) for i in range(p)]
        if p >= 3:
            src[1] = src[0]  # the same tensor twice
        keep = [t.clone() for t in src]
        out = torch.full((n,), -1.0)
        mc.scatter(out, src if rank == root else None, root, algorithm=algorithm)
        assert all(torch.equal(a, b) for a, b in zip(src, keep)), f"rank {rank}: scatter_list changed"
        return out

    def gather(rank):
        t = torch.arange(n, dtype=torch.float32) + 10 * rank
        keep = t.clone()
        outs = [torch.full((n,), -1.0) for _ in range(p)] if rank == root else None
        mc.gather(t, outs, root, algorithm=algorithm)
        assert torch.equal(t, keep), f"rank {rank}: gather input changed"
        return outs

    got = mc.run_local(scatter, p, timeout=30)
    for r in range(p):
        assert torch.equal(got[r], source(r)), (r, got[r])
    outs = mc.run_local(gather, p, timeout=30)[root]
    for r in range(p):
        assert torch.equal(outs[r], torch.arange(n, dtype=torch.float32) + 10 * r), (r, outs[r])


def test_even_all_to_all_without_check_needs_no_exchange_of_split_sizes():
    """With no split sizes given, every rank splits evenly: under
    ``check=False`` nothing travels but the data (uneven splits still
    exchange their sizes first, since a rank cannot know what it receives)."""
    world = mc.LocalWorld(4)

    def fn(rank):
        out = torch.empty(8)
        mc.all_to_all_single(out, torch.arange(8.0) + 10 * rank, algorithm="linear", check=False)
        uneven = torch.empty(8)
        mc.all_to_all_single(uneven, torch.arange(8.0), [2] * 4, [2] * 4, algorithm="linear", check=False)
        return out.tolist()

    got = world.run(fn)
    want = [[10.0 * s + 2 * r + k for s in range(4) for k in range(2)] for r in range(4)]
    assert got == want
    data = [e for e in world.trace if e.collective == "all_to_all_single"]
    checks = [e for e in world.trace if e.collective == "all_to_all_single (argument check)"]
    assert len(data) == 2 * 4 * 3  # two calls, each rank sends to 3 peers
    # one handshake only (the uneven call's): an all-reduce of each field's largest and smallest
    # value (recursive doubling: 4 ranks x 2 rounds), then, split sizes being needed, a Bruck
    # all-gather of 4 descriptors that carry them
    from mycollectives.api.agree import _HEAD, _MSG

    head, width = 2 * _HEAD * 8, (_HEAD + _MSG + 2 * 4) * 8  # bytes
    assert sum(e.nbytes for e in checks) == 4 * 2 * head + 4 * width + 4 * 2 * width


def test_async_on_a_local_world_completes_before_returning_and_offers_torchs_work():
    def fn(rank):
        t = torch.full((3,), float(rank))
        work = mc.all_reduce(t, async_op=True)
        assert work.is_completed() and work.is_success() and work.exception() is None
        assert work.wait() is True and work.result()[0] is t
        return work.get_future().wait()[0].tolist()

    assert mc.run_local(fn, 3) == [[3.0] * 3] * 3


def test_torchs_newer_single_tensor_names():
    def fn(rank):
        out = torch.empty(6)
        mc.all_gather_single(out, torch.full((2,), float(rank)))
        small = torch.empty(2)
        mc.reduce_scatter_single(small, torch.arange(6.0))
        return out.tolist(), small.tolist()

    got = mc.run_local(fn, 3)
    assert all(o == [0.0, 0.0, 1.0, 1.0, 2.0, 2.0] for o, _ in got)
    assert [s for _, s in got] == [[0.0, 3.0], [6.0, 9.0], [12.0, 15.0]]
