"""Inside a virtual run, collectives run what NCCL 2.30.7 would (mycollectives.virtual.tuning), the
run records each call, data-free runs give the same virtual times, and the bench prints the table."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

import mycollectives as mc
from mycollectives import virtual
from mycollectives.bench import cli
from mycollectives.bench.report import parse_table
from mycollectives.nccl import constants as K
from mycollectives.nccl import enqueue
from mycollectives.nccl.search import system as search_system
from mycollectives.sim import simulate
from mycollectives.sim.nccl import choose, hardware
from mycollectives.sim.pipeline import nvls_channels
from mycollectives.sim.tuner import SCHEDULES, nccl_call
from mycollectives.topology import cluster

T = 300  # wall-clock guard of every run, seconds
MiB = 1 << 20
SIZES = [8, 4096, 64 << 10, MiB, 16 * MiB, 1 << 30, 8 << 30]
TOPOLOGIES = [("dgx_h100", 1, {}), ("dgx_h100", 2, {}), ("dgx_h100", 2, {"sharp": True}), ("dgx_a100", 2, {})]


@pytest.mark.parametrize("node,nodes,kw", TOPOLOGIES)
@pytest.mark.parametrize("collective", ["all_reduce", "all_gather", "reduce_scatter", "broadcast"])
def test_choice_is_the_tuner_models(node, nodes, kw, collective):
    topo = cluster(node, nodes=nodes, **kw)
    s = search_system(hardware(topo), topo.num_gpus, nodes, collnet=topo.sharp)
    for n in SIZES:
        got = nccl_call(collective, n, topo, nodes, topo.gpus_per_node)
        algorithm, protocol, table = choose(collective, n, topo)
        assert (got.algorithm, got.protocol) == (algorithm, protocol)
        assert got.nccl_time_s == pytest.approx(table[algorithm, protocol])
        assert (got.schedule, got.exact) == SCHEDULES[collective, algorithm]
        assert got.schedule in mc.algorithms(collective)
        if algorithm in ("NVLS", "NVLSTree"):  # all of comm->nvlsChannels
            assert got.channels == nvls_channels(s, hardware(topo).nic_gbs)
        elif algorithm in ("Ring", "Tree"):  # topoGetAlgoInfo's loop: the most channels the threshold allows
            thr = enqueue.threshold(s, algorithm, protocol) * enqueue.max_threads(s, algorithm, protocol)
            assert 1 <= got.channels <= s.runtime_channels
            assert got.channels == 1 or n >= got.channels * thr
            assert got.channels == s.runtime_channels or n < (got.channels + 1) * thr


def test_nvlink_sharp_and_sharp_appear_where_the_hardware_has_them():
    one, two = cluster("dgx_h100", nodes=1), cluster("dgx_h100", nodes=2)
    assert nccl_call("all_reduce", 1 << 30, one, 1, 8).algorithm == "NVLS"
    assert nccl_call("all_reduce", 1 << 30, two, 2, 8).algorithm == "NVLSTree"
    assert nccl_call("all_reduce", 1 << 30, cluster("dgx_a100", nodes=1), 1, 8).algorithm == "Ring"
    sharp = cluster("dgx_h100", nodes=2, sharp=True)
    assert ("CollNetDirect", "Simple") in choose("all_reduce", 1 << 30, sharp)[2]
    assert ("CollNetDirect", "Simple") not in choose("all_reduce", 1 << 30, two)[2]
    small = [nccl_call("all_reduce", n, two, 2, 8).channels for n in (8, 4096, 64 << 10)]
    assert small == sorted(small) and small[0] == 1 and small[-1] > 1  # channels grow with the size
    assert K.THREAD_THRESHOLD["Simple"] > K.THREAD_THRESHOLD["LL"]


def _calls(rank, sizes, via_dist):
    out = []
    for n in sizes:
        x = torch.full((n // 4,), float(rank + 1))
        dist.all_reduce(x) if via_dist else mc.all_reduce(x)
        out.append(x[0].item())
    mc.all_reduce(torch.ones(4), algorithm="ring")  # an algorithm named: not NCCL's choice, not recorded
    return out


@pytest.mark.parametrize("via_dist", [False, True])
def test_the_run_records_each_call_and_computes_it(via_dist):
    sizes = [4096, MiB, 16 * MiB]
    run = virtual.run(_calls, "dgx_h100", 1, (sizes, via_dist), dist=via_dist, timeout=T)
    assert all(r == [36.0] * len(sizes) for r in run.results)  # 1 + ... + 8, whatever ran
    assert [c.nbytes for c in run.calls] == sizes
    for c in run.calls:
        assert c.collective == "all_reduce" and c.gpus == tuple(range(8))
        assert c.choice == nccl_call("all_reduce", c.nbytes, run.topology, 1, 8)
        assert c.priced == ("flows" if c.choice.exact else "NCCL's model")
    nvls = run.calls[-1]
    assert nvls.choice.algorithm == "NVLS" and nvls.choice.schedule == "direct" and nvls.seconds > 0


def _timed(rank, n, data):
    x = torch.ones(n // 4) if data else torch.empty(n // 4, device="meta")
    t = []
    for _ in range(2):
        t0 = virtual.clock()
        mc.all_reduce(x)
        t.append(virtual.clock() - t0)
    return t


@pytest.mark.parametrize("nodes", [1, 2])
def test_data_free_gives_the_same_virtual_times(nodes):
    for n in (8, 64 << 10, MiB, 16 * MiB):
        with_data = virtual.run(_timed, "dgx_h100", nodes, (n, True), timeout=T)
        free = virtual.run(_timed, "dgx_h100", nodes, (n, False), data=False, timeout=T)
        assert free.clocks == with_data.clocks and free.results == with_data.results
        assert free.stats["flows"] == with_data.stats["flows"]
        assert [c.choice for c in free.calls] == [c.choice for c in with_data.calls]


def test_a_meta_tensor_is_refused_in_a_run_with_data():
    def body(rank):
        mc.all_reduce(torch.empty(4, device="meta"))

    with pytest.raises(ValueError, match="argument 'tensor' is a meta tensor"):
        virtual.run(body, "dgx_h100", 1, world_size=2, timeout=T)
    with pytest.raises(TypeError, match="'data' must be True or False"):
        virtual.run(body, "dgx_h100", 1, data="no")


def _bench(capsys, *flags):
    cli.main(["--virtual", "dgx_h100", "-b", "8", "-e", "1M", "-f", "64", "-n", "2", "-w", "1", *flags])
    return capsys.readouterr().out


def test_the_bench_prints_nccl_tests_table_in_virtual_time(capsys):
    out = _bench(capsys, "--algorithm", "native,ring", "--data", "1", "-c", "1")
    assert "virtual time on dgx_h100 x1" in out and "NCCL 2.30.7" in out
    rows = parse_table(out)
    assert [int(r[0]) for r in rows] == [8, 512, 32768]  # -e 1M at -f 64 stops at 32 KiB x 64 = 2 MiB > 1 MiB
    for r in rows:
        assert r[8] == "0" and r[12] == "0"  # #wrong, both algorithms, real data checked
        size, t = int(r[0]), float(r[9]) * 1e-6
        want = virtual.run(_ring, "dgx_h100", 1, (size,), timeout=T)
        assert t == pytest.approx(max(want.results), rel=1e-3)  # the ring column: its virtual time per call
    free = parse_table(_bench(capsys, "--algorithm", "native,ring"))
    assert [r[5:8] + r[9:12] for r in free] == [r[5:8] + r[9:12] for r in rows]  # data-free: same times
    assert all(r[8] == "N/A" for r in free)


def _ring(rank, n):
    """nccl-tests' loop, written out: a warm-up call, then two timed back to back (-w 1 -n 2)."""
    x = torch.ones(n // 4)
    mc.all_reduce(x, algorithm="ring", check=False)
    mc.barrier(check=False)
    t0 = virtual.clock()
    for _ in range(2):
        mc.all_reduce(x, algorithm="ring", check=False)
    return (virtual.clock() - t0) / 2


def test_the_bench_refuses_a_bad_cluster_before_running(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["--virtual", "dgx_h999", "-b", "8", "-e", "8"])
    assert e.value.code == 2 and "dgx_h999" in capsys.readouterr().err


def _free_call(rank, n):
    x = torch.empty(n // 4, device="meta")
    t0 = virtual.clock()
    mc.all_reduce(x, check=False)
    return virtual.clock() - t0


def test_the_protocol_nccl_picks_prices_the_flows():
    """A ring at NCCL's protocol takes what the round simulator gives that protocol (LL: half the
    bandwidth, its own latencies), though the run's own protocol is Simple (reductions free, as there)."""
    seen = set()
    for n in (64 << 10, MiB, 8 * MiB, 64 * MiB):
        run = virtual.run(
            _free_call, "dgx_a100", 1, (n,), data=False, timeout=T, compute=virtual.NETWORK_ONLY
        )
        c = run.calls[0].choice
        seen.add(c.protocol)
        k = run.calls[0].channels_run
        assert k == c.channels  # priced as flows: NCCL's channels run
        sim = simulate("all_reduce", c.schedule, n, run.topology, protocol=c.protocol.lower(), channels=k)
        assert max(run.results) == pytest.approx(sim.time_s, rel=1e-3)
    assert {"LL", "Simple"} <= seen


def _half_nodes(rank):
    g = virtual.transport().subgroup([0, 1, 2, 3, 8, 9, 10, 11])
    x = torch.ones(4 * MiB)
    if g is not None:
        mc.all_reduce(x, group=g)
    return x[0].item()


def test_a_subgroup_gets_nccls_choice_for_its_own_shape():
    run = virtual.run(_half_nodes, "dgx_h100", 2, timeout=T)
    assert [r for r in run.results if r != 1.0] == [8.0] * 8
    (call,) = run.calls
    assert call.gpus == (0, 1, 2, 3, 8, 9, 10, 11)
    want = nccl_call("all_reduce", 16 * MiB, run.topology, 2, 4)
    assert call.choice.algorithm == want.algorithm and call.choice.channels == want.channels
    if want.schedule == "hierarchical":  # its nodes are half the run's: a flat schedule moves the data
        assert call.choice.schedule == "ring"
