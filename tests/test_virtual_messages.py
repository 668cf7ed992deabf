"""Messages, not rounds (issue 37): in a virtual run each message is a flow from when it is posted,
priced by its own route; no rank waits for a round to end elsewhere."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import mycollectives as mc
from mycollectives import virtual
from mycollectives.algorithms import schedule_for
from mycollectives.sim.engine import LinkModel
from mycollectives.topology import dgx_h100
from mycollectives.transport import Capabilities

T = 120


def _broadcast(rank):
    x = torch.ones(1 << 18)  # 1 MiB
    mc.broadcast(x, src=0, algorithm="binomial", check=False)
    return virtual.clock()


def test_a_slow_link_delays_only_the_ranks_that_wait_on_its_message():
    rounds = schedule_for("broadcast", "binomial", 8, 1 << 20).rounds
    assert [(r.src.tolist(), r.dst.tolist()) for r in rounds[:2]] == [([0], [4]), ([0, 4], [2, 6])]
    topo = dgx_h100()
    sw = topo.names.index("n0.nvswitch")
    into_6 = int(np.flatnonzero((topo.link_src == sw) & (topo.link_dst == 6))[0])  # only 4 -> 6 uses it
    fast = virtual.run(_broadcast, topo, timeout=T).results
    slow = virtual.run(_broadcast, topo, degrade={into_6: 20.0}, timeout=T).results
    assert len(set(fast)) == 1
    assert slow[:4] == fast[:4]  # ranks 0-3 never wait on rank 6's link
    assert all(s > 2 * fast[0] for s in slow[4:])  # 4 sends on it, 6 receives on it, 5 and 7 hear after


def _p2p(rank, calls):
    x = torch.ones(1)
    t0 = virtual.clock()
    for _ in range(calls):
        if rank == 0:
            mc.send(x, 1)
        else:
            mc.recv(x, 0)
    return virtual.clock() - t0


def test_base_latency_once_per_call_and_each_send_is_a_call():
    run = virtual.run(_p2p, "dgx_h100", 1, (3,), world_size=2, timeout=T)
    model = LinkModel(run.topology)  # a send pays base latency and its route's step latency
    one = model.base_latency + model.round_latency(np.array([0]), np.array([1]))
    assert run.results[1] == pytest.approx(3 * one, rel=1e-6)


def _two_calls(rank):
    x = torch.ones(8)
    t0 = virtual.clock()
    mc.all_reduce(x, algorithm="ring", check=False, channels=1)
    t1 = virtual.clock()
    mc.all_reduce(x, algorithm="ring", check=False, channels=1)
    return t1 - t0, virtual.clock() - t1


def test_every_call_pays_the_base_latency_once():
    run = virtual.run(_two_calls, "dgx_h100", 1, world_size=2, timeout=T)
    model = LinkModel(run.topology)
    step = model.round_latency(np.array([0]), np.array([1]))
    for first, second in run.results:
        assert first == pytest.approx(model.base_latency + 2 * step, rel=1e-3)
        assert second == pytest.approx(first, rel=1e-6)


def test_the_contract_has_no_schedule_pricing_hook():
    fields = set(Capabilities.__dataclass_fields__)
    assert "prices_schedules" not in fields
    import mycollectives.transport.contract as contract

    assert not hasattr(contract, "PricesSchedules")
    assert "begin" not in vars(contract.PricesLoads)


@pytest.mark.timeout(600)
def test_the_two_engines_are_reported_side_by_side_on_the_single_node_rows():
    from mycollectives.sim.validate import points

    rows = virtual.engines(max_bytes=64 << 10, timeout=300)
    want = [p.id for p in points() if p.set == "asserted" and p.nodes == 1 and p.model is not None]
    assert [r["id"] for r in rows] == [i for i in want if i in {r["id"] for r in rows}]
    assert len(rows) >= 20
    for r in rows:
        assert r["ratio"] == pytest.approx(r["virtual_s"] / r["simulated_s"])
        assert r["bytes"] <= 64 << 10 and r["channels"] >= 1
        assert 0.5 < r["ratio"] < 1.5, r  # a report, not a fit: the engines differ where rounds overlap
