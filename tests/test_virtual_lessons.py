"""The labs' lessons, asserted on the virtual cluster (deterministic virtual time, so no flakiness).

Lab 3: ring against double binary tree on two DGX H100 nodes; lab 4: bucketed
DDP hides most of its all-reduce; lab 6: the 1F1B bubble against
``(p - 1) / (m + p - 1)``; lab 8: hierarchical against the flat ring across
nodes. Each runs the labs' own code (``labs/scripts``) where it is cheap
enough, with ``timeout=`` on every run.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import mycollectives as mc
from labs.scripts import common, ddp, pipeline
from mycollectives import virtual

MiB = 1 << 20
T = 120  # wall-clock seconds before a run gives up


def _all_reduce(rank: int, algorithm: str, nbytes: int) -> float:
    t = torch.ones(nbytes // 4)
    mc.barrier()
    t0 = virtual.clock()
    mc.all_reduce(t, algorithm=algorithm)
    mc.barrier()
    assert t[0].item() == 16.0
    return virtual.clock() - t0


def _time(algorithm: str, nbytes: int, **cluster_kw) -> float:
    run = virtual.run(_all_reduce, "dgx_h100", 2, (algorithm, nbytes), timeout=T, **cluster_kw)
    return max(run.results)


def test_lab3_ring_wins_large_tree_wins_small_on_two_nodes():
    """One NIC per node (the package's one flat ring uses one NIC whatever the node has)."""
    one_nic = dict(nics_per_node=1)
    assert _time("ring", 64 * MiB, **one_nic) < _time("double_binary_tree", 64 * MiB, **one_nic)
    assert _time("double_binary_tree", 64 << 10, **one_nic) < _time("ring", 64 << 10, **one_nic)


def test_lab8_hierarchical_beats_flat_ring_across_nodes_and_the_ring_catches_up():
    """Lab 8's page: the hierarchical all-reduce wins at 64 KiB; at 16 MiB the ring (on NCCL's
    channels, one per NIC) has caught up, so the hierarchy's lead is smaller there."""
    lead = {n: _time("ring", n) / _time("hierarchical", n) for n in (64 << 10, 16 * MiB)}
    assert lead[64 << 10] > 1 and lead[16 * MiB] < lead[64 << 10], lead


def _env(rank: int, world: int) -> common.Env:
    return common.Env(rank, world, rank, world, torch.device("cpu"), "virtual", mode="virtual")


def _ddp_overlap(rank: int, width: int, batch: int) -> float:
    env = _env(rank, 2)
    common.native_group()
    model = common.make_model(width, 8, env)
    mb = sum(p.numel() for p in model.parameters()) * 4 / MiB
    m = ddp.BucketedDDP(model, env, mb / 16 * MiB)  # lab 4's smallest buckets
    assert len(m.buckets) >= 4
    x, y = ddp.batch(0, batch * 2, width, env)
    _, hidden, comm = ddp.one_step(m, ddp.shard(x, env), ddp.shard(y, env), nn.MSELoss(), env)
    return hidden / comm


def test_lab4_bucketed_ddp_hides_at_least_half_of_its_all_reduce():
    """Lab 4's page: 2 GPUs of a DGX H100, the script's CPU model (width 256, 16 rows per GPU)."""
    run = virtual.run(_ddp_overlap, "dgx_h100", world_size=2, args=(256, 16), dist=True, timeout=T)
    assert min(run.results) >= 0.5, run.results


class _Charged(torch.autograd.Function):
    """Identity that charges ``seconds`` of GPU work forward and twice that backward."""

    @staticmethod
    def forward(ctx, x, seconds):
        ctx.seconds = seconds
        virtual.compute(seconds=seconds)
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        virtual.compute(seconds=2 * ctx.seconds)
        return g, None


class _Stage(nn.Module):
    def __init__(self, seconds: float):
        super().__init__()
        self.lin, self.seconds = nn.Linear(8, 8), seconds

    def forward(self, x):
        return _Charged.apply(self.lin(x), self.seconds)


def _bubble(rank: int, p: int, m: int, kind: str) -> float:
    env = _env(rank, p)
    common.native_group()
    xs, ys = list(torch.randn(m, 4, 8)), list(torch.randn(m, 4, 8))
    r = pipeline.run_stage(_Stage(2e-3), pipeline.schedule(kind, m, p, rank), env, xs, ys, (4, 8))
    return pipeline.bubble_of(r, p)[0]


@pytest.mark.parametrize("p,m", [(4, 8), (4, 16), (2, 8)])
def test_lab6_1f1b_bubble_matches_the_formula(p, m):
    """Stages of 2 ms forward and 4 ms backward: messages (tens of us) are then nearly free,
    as the formula assumes, and the schedule of ``pipeline.py`` gives its bubble within 5 %."""
    for kind in ("1f1b", "gpipe"):
        run = virtual.run(_bubble, "dgx_h100", world_size=p, args=(p, m, kind), dist=True, timeout=T)
        ideal = (p - 1) / (m + p - 1)
        assert abs(run.results[0] / ideal - 1) < 0.05, (kind, run.results[0], ideal)


@pytest.mark.timeout(300)
@pytest.mark.multiprocess  # the script runs as a reader runs it: python labs/scripts/pipeline.py --virtual ...
def test_lab6_the_scripts_own_bubble_matches_the_formula_on_a_virtual_node():
    """``pipeline.py`` itself on 4 virtual H100s with its virtual defaults (m = 4, 8, 16): the bubble,
    time spent waiting for another stage, within 5 % of ``(p - 1) / (m + p - 1)``. A message's own time
    (measured by the script first) is communication: the fraction of the step not computing is larger."""
    from labs.scripts.launch import torchrun  # the package's name for it, wherever sys.path points

    res = torchrun("pipeline.py", "--ranks", "4", virtual="dgx_h100", echo=False, timeout=300)
    assert res["p"] == 4 and res["message"] > 0
    assert sorted({r["m"] for r in res["sweep"]}) == [4, 8, 16]
    assert {r["schedule"] for r in res["sweep"]} == {"gpipe", "1f1b"}
    for r in res["sweep"]:
        assert abs(r["bubble"] / r["ideal"] - 1) < 0.05, r
        assert r["idle"] > r["bubble"] + 0.01, r  # the messages take time on a virtual node too
