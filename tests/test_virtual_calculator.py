"""Issue 28, item 8: a virtual DDP step of lab 4's model against chapter 5's step-time calculator.

The calculator is calibrated on one GPU (its measured step gives the compute
rate) and predicts the step on 8 and 16 GPUs of DGX H100 nodes from DDP's
buckets and the topology; the virtual cluster runs torch's DDP on them. Virtual
time is deterministic, so the bounds are exact statements, not timing luck.
"""

from __future__ import annotations

import pytest
import torch

from labs.scripts.common import Env, make_model
from mycollectives.steptime.dense import DenseModel, data_parallel_step, stream_hidden
from mycollectives.steptime.layout import Layout
from mycollectives.topology import cluster

CPU = Env(0, 1, 0, 1, torch.device("cpu"), "virtual")


def build(width: int, depth: int) -> torch.nn.Module:
    return make_model(width, depth, CPU)  # lab 4's MLP


@pytest.mark.timeout(600)
def test_a_ddp_step_of_lab4s_model_matches_the_calculator_within_10_percent():
    from mycollectives.book.ddp_calculator import compare

    # one bucket (nothing hides), two (the first hides behind backward), eight (the stream is the bottleneck)
    rows = compare(build, [(256, 25.0), (256, 1.0), (512, 1.0)], nodes=(1, 2))
    assert [(r["gpus"], r["buckets"]) for r in rows] == [(8, 1), (16, 1), (8, 2), (16, 2), (8, 8), (16, 8)]
    for r in rows:
        assert r["all_reduce"] > 0.25 * r["virtual"], r  # the all-reduce is a real part of the step
        assert abs(r["error"]) < 0.10, r
    # without DDP's buckets (one all-reduce, hidden behind all of backward) the calculator misses by far
    assert max(abs(r["one_call_error"]) for r in rows) > 0.25


def test_the_stream_hides_what_ends_before_backward_does():
    assert stream_hidden([1.0, 1.0, 1.0], [1, 1, 1], backward=6.0) == [1.0, 1.0, 0.0]
    # the stream falls behind: bucket 1 starts when bucket 0 ends (at 5), past the end of backward
    assert stream_hidden([4.0, 1.0], [1, 1], backward=2.0) == [1.0, 0.0]


def test_data_parallel_step_prices_buckets_and_refuses_what_it_cannot_express():
    mlp = DenseModel("MLP", params=1_000_000, flops_per_sample=6e6)
    topo = cluster("dgx_h100")
    lay = Layout(dp=8, micro_batch=10)
    one = data_parallel_step(mlp, lay, topo, compute_rate=1e12)
    four = data_parallel_step(mlp, lay, topo, compute_rate=1e12, buckets=[1e6] * 4)
    assert one.compute == pytest.approx(60e-6) and len(four.rows) == 4
    assert four.communication > one.communication  # each bucket pays its own latency
    assert four.rows[-1].hidden == 0.0 and four.exposed > 0
    none = data_parallel_step(mlp, lay, topo, compute_rate=1e12, buckets=[1e6] * 4, overlap=False)
    assert none.exposed == pytest.approx(none.communication)
    with pytest.raises(ValueError, match="adding up"):
        data_parallel_step(mlp, lay, topo, compute_rate=1e12, buckets=[1e6])
    with pytest.raises(ValueError, match="data parallelism"):
        data_parallel_step(mlp, Layout(tp=8), topo, compute_rate=1e12)
    with pytest.raises(ValueError, match="flops_per_sample"):
        DenseModel("bad", 10, 0.0)
