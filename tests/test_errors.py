"""Errors, not hangs, on the local world.

Bad input on any rank makes every rank raise a clear error before any byte
moves, with every caller's tensors untouched; a rank that never joins gives
a timeout naming the round and the peer; a rank that fails mid-collective
makes the others raise at once.
"""

from __future__ import annotations

import time

import pytest
import torch

import mycollectives as mc
from mycollectives.transport.local import LocalTransport

P = 4


def _t(*shape, value=1.0, dtype=torch.float32):
    return torch.full(shape, value, dtype=dtype)


# Each entry: name -> fn(rank) that makes one bad call; the expected error
# type on the offending rank and a fragment every rank's message must hold.
CATALOGUE = {
    "not a tensor": (lambda r: mc.all_reduce([1.0, 2.0]), TypeError, "argument 'tensor'"),
    "one rank's size differs": (lambda r: mc.all_reduce(_t(5 if r == 2 else 4)), ValueError, "element count"),
    "one rank's dtype differs": (
        lambda r: mc.all_reduce(_t(4, dtype=torch.float64 if r == 1 else torch.float32)),
        ValueError,
        "dtype",
    ),
    "ranks call different collectives": (
        lambda r: mc.all_reduce(_t(4)) if r % 2 else mc.broadcast(_t(4), src=0),
        ValueError,
        "rank 0: broadcast, rank 1: all_reduce",
    ),
    "root out of range": (lambda r: mc.broadcast(_t(4), src=P), ValueError, "argument 'src'"),
    "one rank's root differs": (lambda r: mc.broadcast(_t(4), src=1 if r == 3 else 0), ValueError, "root"),
    "negative root": (lambda r: mc.reduce(_t(4), dst=-1), ValueError, "argument 'dst'"),
    "root is not an int": (lambda r: mc.scatter(_t(2), None, src="0"), TypeError, "argument 'src'"),
    "ops differ": (
        lambda r: mc.all_reduce(_t(4), op=mc.ReduceOp.MAX if r == 0 else mc.ReduceOp.SUM),
        ValueError,
        "op",
    ),
    "AVG of integers": (
        lambda r: mc.all_reduce(_t(4, dtype=torch.int32), op=mc.ReduceOp.AVG),
        TypeError,
        "AVG",
    ),
    "unsupported op": (lambda r: mc.all_reduce(_t(4), op="xor"), ValueError, "argument 'op'"),
    "unknown algorithm": (lambda r: mc.all_reduce(_t(4), algorithm="butterfly"), ValueError, "butterfly"),
    "algorithms differ": (
        lambda r: mc.all_reduce(_t(4), algorithm="ring" if r else "recursive_doubling"),
        ValueError,
        "algorithm",
    ),
    "non-contiguous": (lambda r: mc.all_reduce(_t(4, 4).t()), ValueError, "contiguous"),
    "all_gather output too small": (
        lambda r: mc.all_gather_into_tensor(_t(P * 3 - (r == 1)), _t(3)),
        ValueError,
        "argument 'output'",
    ),
    "all_gather list too short": (
        lambda r: mc.all_gather([_t(3)] * (P - (r == 0)), _t(3)),
        ValueError,
        "tensor_list",
    ),
    "reduce_scatter input of the wrong size": (
        lambda r: mc.reduce_scatter_tensor(_t(2), _t(7)),
        ValueError,
        "argument 'input'",
    ),
    "scatter list missing on the root": (lambda r: mc.scatter(_t(2), None, src=0), TypeError, "scatter_list"),
    "gather list of the wrong dtype": (
        lambda r: mc.gather(_t(2), [_t(2, dtype=torch.int64)] * P if r == 0 else None, dst=0),
        TypeError,
        "gather_list",
    ),
    "all_to_all splits that do not add up": (
        lambda r: mc.all_to_all_single(_t(4), _t(4), [1, 1, 1, 1], [1, 1, 1, 2] if r == 3 else [1, 1, 1, 1]),
        ValueError,
        "input_split_sizes",
    ),
    "all_to_all splits that disagree between ranks": (
        lambda r: mc.all_to_all_single(_t(4), _t(5 if r == 0 else 4), None, [1, 2, 1, 1] if r == 0 else None),
        ValueError,
        "expects",
    ),
    "uneven all_to_all with no splits": (lambda r: mc.all_to_all_single(_t(6), _t(6)), ValueError, "divide"),
    "unknown option": (lambda r: mc.all_reduce(_t(4), timout=3), TypeError, "timout"),
    "group of the wrong type": (lambda r: mc.all_reduce(_t(4), group="world"), TypeError, "group"),
    "negative timeout": (lambda r: mc.all_reduce(_t(4), timeout=-1), ValueError, "argument 'timeout'"),
    "zero timeout": (lambda r: mc.all_reduce(_t(4), timeout=0), ValueError, "argument 'timeout'"),
    "timeout as a string": (lambda r: mc.all_reduce(_t(4), timeout="5"), TypeError, "argument 'timeout'"),
    "infinite timeout": (
        lambda r: mc.all_reduce(_t(4), timeout=float("inf")),
        ValueError,
        "argument 'timeout'",
    ),
    "nan timeout on one rank": (
        lambda r: mc.all_reduce(_t(4), timeout=float("nan") if r == 1 else 10.0),
        ValueError,
        "timeout",
    ),
    "check that is not a bool": (lambda r: mc.all_reduce(_t(4), check="yes"), TypeError, "argument 'check'"),
    "segment_bytes of zero": (
        lambda r: mc.broadcast(_t(4), 0, algorithm="chain", segment_bytes=0),
        ValueError,
        "argument 'segment_bytes'",
    ),
    "meta tensor": (lambda r: mc.all_reduce(torch.empty(4, device="meta")), ValueError, "meta tensor"),
    "bitwise op on floats": (lambda r: mc.all_reduce(_t(4), op=mc.ReduceOp.BXOR), TypeError, "bitwise"),
    "PREMUL_SUM": (lambda r: mc.all_reduce(_t(4), op="premul_sum"), ValueError, "PREMUL_SUM"),
    "hierarchical node size that does not divide p": (
        lambda r: mc.all_reduce(_t(4), algorithm="hierarchical", local_size=3),
        ValueError,
        "local_size=3",
    ),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", list(CATALOGUE))
def test_bad_input_raises_on_every_rank_and_leaves_tensors_untouched(name):
    bad_call, kind, fragment = CATALOGUE[name]
    world = mc.LocalWorld(P, timeout=20)

    def fn(rank):
        bad_call(rank)

    t0 = time.monotonic()
    results = world.run(fn, return_exceptions=True)
    assert time.monotonic() - t0 < 30
    for rank, res in enumerate(results):
        assert isinstance(res, (ValueError, TypeError)), f"rank {rank} did not raise: {res!r}"
        assert fragment in str(res), f"rank {rank}: {res}"
        assert f"on rank {rank}" in str(res), f"rank {rank}: the message should name the rank: {res}"
    assert any(isinstance(r, kind) for r in results)
    assert not [e for e in world.trace if "check" not in e.collective], "bytes moved despite bad input"


def test_bad_input_leaves_every_tensor_unchanged():
    def fn(rank):
        t = torch.arange(4.0) + rank
        out = torch.full((P * 4 - (rank == 2),), -1.0)
        keep_t, keep_out = t.clone(), out.clone()
        with pytest.raises(ValueError, match="rank 2"):
            mc.all_gather_into_tensor(out, t)
        assert torch.equal(t, keep_t) and torch.equal(out, keep_out)
        t2 = torch.arange(5.0 if rank == 1 else 4.0)
        keep = t2.clone()
        with pytest.raises(ValueError):
            mc.all_reduce(t2, algorithm="ring")
        assert torch.equal(t2, keep)
        return True

    assert mc.run_local(fn, P, timeout=20) == [True] * P


@pytest.mark.timeout(60)
@pytest.mark.parametrize("check", [True, False])
def test_a_rank_that_never_joins_times_out_naming_round_and_peer(check):
    def fn(rank):
        if rank == 3:
            return None  # never calls the collective
        mc.all_reduce(torch.ones(8), algorithm="ring", check=check, timeout=1.5)

    t0 = time.monotonic()
    res = mc.LocalWorld(4, timeout=30).run(fn, return_exceptions=True)
    assert time.monotonic() - t0 < 15
    errors = res[:3]
    assert all(isinstance(e, mc.CollectiveError) for e in errors), errors
    # whoever waits on rank 3 times out naming it and the round; the ranks
    # waiting on them fail at once, passing the cause on
    assert any(isinstance(e, mc.CollectiveTimeout) for e in errors)
    for e in errors:  # each names the collective, the round and the peer it waited on
        assert "all_reduce" in str(e) and "round" in str(e) and "from rank" in str(e), e
    # the local world sees that rank 3 has returned, so it need not wait out the timeout
    assert any(
        "receive from rank 3 timed out" in str(e)
        or "receive from rank 3, which has already returned" in str(e)
        for e in errors
    )
    if not check:
        assert isinstance(res[0], mc.CollectiveTimeout) and "(ring)" in str(res[0])
        assert "round 0 of 6: receive from rank 3" in str(res[0])
    else:
        assert "argument check" in str(res[2]) and "receive from rank 3" in str(res[2])


@pytest.mark.timeout(60)
def test_a_rank_failing_mid_collective_makes_the_others_raise_at_once(monkeypatch):
    original = LocalTransport.exchange

    def flaky(self, sends, recvs, label):
        if self.rank == 1 and label.round == 2 and label.collective == "all_reduce":
            raise RuntimeError("simulated crash of rank 1")
        return original(self, sends, recvs, label)

    monkeypatch.setattr(LocalTransport, "exchange", flaky)

    def fn(rank):
        mc.all_reduce(torch.ones(1000), algorithm="ring", check=False)

    t0 = time.monotonic()
    res = mc.LocalWorld(4, timeout=60).run(fn, return_exceptions=True)
    assert time.monotonic() - t0 < 10, "the others waited for their timeout"
    assert "simulated crash" in str(res[1])
    others = [res[r] for r in (0, 2, 3)]
    assert all(isinstance(e, (mc.PeerError, mc.CollectiveError)) for e in others), others
    assert any("rank 1 failed" in str(e) for e in others)


def test_run_local_reraises_the_first_failure_with_its_rank():
    def fn(rank):
        if rank == 2:
            raise KeyError("boom")
        return rank

    with pytest.raises(KeyError, match="boom") as info:
        mc.run_local(fn, 3)
    assert any("rank 2" in note for note in info.value.__notes__)


def test_p2p_errors_name_the_argument():
    def fn(rank):
        with pytest.raises(ValueError, match="argument 'dst'.*itself"):
            mc.send(torch.ones(1), dst=rank)
        with pytest.raises(ValueError, match="argument 'src'"):
            mc.recv(torch.ones(1), src=9)
        with pytest.raises(mc.CollectiveTimeout, match="from rank"):
            mc.irecv(torch.ones(1), src=1 - rank).wait(0.2)

    mc.run_local(fn, 2)
