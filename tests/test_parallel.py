"""Chapter 5's strategies on local worlds: outputs and gradients against the unsharded
reference, the bytes they send against the calculator's formulas, and the calculator."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import mycollectives as mc
from mycollectives.book.parallel import checks
from mycollectives.parallel import fsdp, overlap, sp, tp
from mycollectives.parallel import model as M
from mycollectives.parallel.mesh import Mesh, Stream, SubGroup
from mycollectives.sim import simulate
from mycollectives.steptime import costs, groupsim, traffic
from mycollectives.steptime.calculator import step_time
from mycollectives.steptime.config import LLAMA3_8B, LLAMA3_70B, LLAMA3_405B, ModelConfig
from mycollectives.steptime.layout import Layout
from mycollectives.topology import cluster, dgx_h100

TOL = 1e-9  # float64 throughout


# --- meshes and subgroups -------------------------------------------------------------


def test_mesh_places_ranks_like_a_device_mesh():
    def where(rank):
        mesh = Mesh({"dp": 2, "cp": 2, "tp": 2})
        return mesh.coords(), mesh.members("tp"), mesh.members("dp"), mesh.members("cp", "tp")

    out = mc.run_local(where, 8)
    assert out[5] == ({"dp": 1, "cp": 0, "tp": 1}, (4, 5), (1, 5), (4, 5, 6, 7))


def device_mesh_group(shape: dict[str, int], rank: int, axes: tuple[str, ...]) -> list[int]:
    """The ranks of ``rank``'s group along ``axes`` as torch's DeviceMesh defines them:
    ``torch.arange(world).reshape(sizes)``, the group varying only the indices of ``axes``."""
    grid = np.arange(math.prod(shape.values())).reshape(tuple(shape.values()))
    where = np.argwhere(grid == rank)[0]
    index = tuple(slice(None) if name in axes else int(i) for name, i in zip(shape, where))
    return sorted(grid[index].flatten().tolist())


@pytest.mark.parametrize(
    "lay",
    [
        Layout(tp=2, cp=2, pp=2, dp=2),
        Layout(tp=4, pp=3, dp=2),
        Layout(tp=2, cp=3, dp=2, ep=2, zero=3, shard=2),
    ],
)
def test_layout_and_mesh_number_ranks_alike_outermost_first(lay):
    axes_list = [("tp",), ("cp",), ("pp",), ("dp",), ("cp", "dp"), ("tp", "cp")]

    def groups(rank):
        mesh = Mesh(lay.mesh_shape())
        return [list(mesh.members(*axes)) for axes in axes_list]

    by_mesh = mc.run_local(groups, lay.world)
    for rank in range(lay.world):
        for axes, mesh_group in zip(axes_list, by_mesh[rank]):
            want = device_mesh_group(lay.mesh_shape(), rank, axes)
            assert lay.members(axes, rank) == mesh_group == want, (rank, axes)
    assert list(lay.mesh_shape()) == ["dp", "pp", "cp", "tp"]
    assert lay.members(("tp",), 0) == list(range(lay.tp))  # tensor parallelism innermost: consecutive ranks
    for rank in range(lay.world):  # ep and shard are the innermost part of dp, edp and replicate the rest
        dp_group = lay.members(("dp",), rank)
        assert lay.members(("ep",), rank) == dp_group[dp_group.index(rank) // lay.ep * lay.ep :][: lay.ep]


def test_subgroups_run_collectives():
    def body(rank):
        mesh = Mesh({"dp": 2, "tp": 2})
        a, b = torch.tensor([float(rank)]), torch.tensor([10.0 * rank])
        mc.all_reduce(a, group=mesh.group("tp"))
        with Stream() as s:  # a collective on a stream, the main thread waiting for it
            s.submit(mc.all_reduce, b, mc.ReduceOp.SUM, mesh.group("dp", stream=1)).result()
        return a.item(), b.item()

    assert mc.run_local(body, 4) == [(1.0, 20.0), (1.0, 40.0), (5.0, 20.0), (5.0, 40.0)]


def test_streams_have_their_own_tags_so_their_messages_never_mix():
    def body(rank):
        mesh = Mesh({"dp": 2})
        first, second = mesh.group("dp", stream=1), mesh.group("dp", stream=0)
        if rank == 0:  # sent in one order ...
            mc.send(torch.tensor([1.0]), group=first, group_dst=1)
            mc.send(torch.tensor([2.0]), group=second, group_dst=1)
            return None
        a, b = torch.zeros(1), torch.zeros(1)
        mc.recv(b, group=second, group_src=0)  # ... received in the other: each stream's own
        mc.recv(a, group=first, group_src=0)
        return a.item(), b.item()

    assert mc.run_local(body, 2)[1] == (1.0, 2.0)


def test_bad_meshes_and_subgroups_are_refused_clearly():
    def body(rank, what):
        if what == "size":
            Mesh({"dp": 3, "tp": 2})
        elif what == "axis":
            Mesh({"dp": 2, "tp": 2}).group("pp")
        elif what == "member":
            SubGroup(mc.transport.resolve_group(None), [0, 1])

    with pytest.raises(ValueError, match="hold 6 ranks, but the group has 4"):
        mc.run_local(body, 4, "size")
    with pytest.raises(ValueError, match="no axis 'pp'"):
        mc.run_local(body, 4, "axis")
    with pytest.raises(ValueError, match="rank 2 is not one of the members"):
        mc.run_local(body, 4, "member")


# --- every strategy against the reference ---------------------------------------------

CASES = [
    ("dp", checks.check_dp, (), (1, 2, 3, 4)),
    ("dp overlapped", checks.check_dp, (True,), (2, 4)),
    ("fsdp", checks.check_fsdp, (1,), (1, 2, 3, 4)),
    ("fsdp no prefetch", checks.check_fsdp, (1, False), (2, 4)),
    ("hsdp", checks.check_fsdp, (2,), (2, 4, 6)),
    ("tp", checks.check_tp, (), (1, 2, 3, 4)),
    ("sp", checks.check_sp, (), (1, 2, 3, 4)),
    ("sp keep", checks.check_sp, (False,), (2, 4)),
    ("cp ring", checks.check_cp, ("ring",), (1, 2, 3, 4, 5)),
    ("cp all-gather", checks.check_cp, ("all_gather",), (1, 2, 3, 4)),
    ("ep", checks.check_ep, (), (1, 2, 3, 4)),
    ("ep hierarchical", checks.check_ep, (2, True), (2, 4, 6, 8)),
    ("pp", checks.check_pp, (), (1, 2, 3, 4)),
    ("pp 4 micro-batches", checks.check_pp, (4,), (2, 4)),
]


@pytest.mark.parametrize("name, fn, args, sizes", CASES, ids=[c[0] for c in CASES])
def test_strategy_matches_the_unsharded_reference(name, fn, args, sizes):
    for p in sizes:
        errs = mc.run_local(fn, p, *args)
        assert checks.worst(errs) < TOL, f"{name} on {p} ranks: {errs}"


def test_a_wrong_shard_is_caught():
    """The checks can fail: TP with the MLP's rows taken from the wrong rank differs."""

    def body(rank):
        cfg = M.BlockConfig()
        params = tp.shard_tp(M.init_params(cfg), rank, 2)
        wrong = tp.shard_tp(M.init_params(cfg), 1 - rank, 2)
        params[0]["w2"] = wrong[0]["w2"]
        x, _ = M.batch(cfg)
        return tp.tp_forward(params, x, cfg, None).detach()

    y_ref = M.reference(M.BlockConfig())[0]
    assert (mc.run_local(body, 2)[0] - y_ref).abs().max() > 1e-3


# --- bytes on the wire against the calculator's formulas ------------------------------


def sent(world, collective=None, src=None) -> int:
    """Bytes in a local world's trace (argument checks left out)."""
    return sum(
        e.nbytes
        for e in world.trace
        if "argument check" not in e.collective
        and (collective is None or e.collective.startswith(collective))
        and (src is None or e.src == src)
    )


def like(cfg: M.BlockConfig, **kw) -> ModelConfig:
    """The calculator's view of the small model (its activations' sizes; float64)."""
    return ModelConfig(
        "block",
        cfg.layers,
        cfg.d,
        cfg.heads,
        cfg.heads,
        cfg.ffn,
        2,
        cfg.seq,
        act_bytes=8,
        param_bytes=8,
        grad_bytes=8,
        **kw,
    )


def formula_bytes(model, lay, strategy=None, collective=None) -> float:
    """Bytes a GPU sends in a step by the formulas, all ranks on one node."""
    links = costs.Links.of(cluster("dgx_h100", 2))
    total = 0.0
    for c in traffic.comms(model, lay):
        if (strategy is None or c.strategy == strategy) and (
            collective is None or c.collective == collective
        ):
            k = costs.cost(c, lay, links)
            total += (k.nvlink_bytes + k.network_bytes) * c.calls
    return total


def test_tensor_parallel_sends_four_all_reduces_per_layer():
    cfg, t = M.BlockConfig(layers=3), 2
    world = mc.LocalWorld(t)
    world.run(checks.check_tp, cfg)
    per_call = 2 * (t - 1) / t * cfg.seq * cfg.batch * cfg.d * 8  # a ring all-reduce of [s, b, h], float64
    assert sent(world, "all_reduce", src=0) == 4 * cfg.layers * per_call
    assert sent(world, "all_reduce", src=0) == formula_bytes(like(cfg), Layout(tp=t, micro_batch=cfg.batch))


def test_sequence_parallel_moves_the_bytes_the_formulas_say():
    cfg, t = M.BlockConfig(d=16, heads=4, ffn=32, seq=8), 2
    lay = Layout(tp=t, sp=True, micro_batch=cfg.batch)
    world = mc.LocalWorld(t)
    world.run(checks.check_sp, True, cfg)
    for coll in ("all_gather", "reduce_scatter", "all_reduce"):
        assert sent(world, coll, src=0) == formula_bytes(like(cfg), lay, "SP", coll), coll
    # the all-gathers and reduce-scatters carry what TP's all-reduces do, plus one re-gather per sub-block
    tp_bytes = formula_bytes(like(cfg), Layout(tp=t, micro_batch=cfg.batch), "TP")
    halves = sent(world, "all_gather", src=0) + sent(world, "reduce_scatter", src=0)
    assert halves == pytest.approx(tp_bytes * 10 / 8)


def test_sequence_parallel_keeps_less_activation_memory():
    cfg, t = M.BlockConfig(d=32, heads=4, ffn=64, seq=16, batch=2, layers=2), 4

    def saved(rank, mode):
        params = tp.shard_tp(M.init_params(cfg), rank, t)
        x, _ = M.batch(cfg)
        s = cfg.seq // t
        if mode == "tp":
            return sp.saved_bytes(tp.tp_forward, params, x.requires_grad_(), cfg, None, exclude=params)[1]
        xs = x[rank * s : (rank + 1) * s].clone().requires_grad_()
        return sp.saved_bytes(sp.sp_forward, params, xs, cfg, None, mode == "regather", exclude=params)[1]

    tp_b, keep_b, regather_b = (mc.run_local(saved, t, m)[0] for m in ("tp", "keep", "regather"))
    assert regather_b < keep_b < tp_b


def test_ring_attention_sends_what_the_formulas_say():
    cfg, c = M.BlockConfig(seq=12), 3
    world = mc.LocalWorld(c)
    world.run(checks.check_cp, "ring", cfg)
    lay = Layout(cp=c, micro_batch=cfg.batch)
    for r in range(c):
        assert sent(world, "send", src=r) == formula_bytes(like(cfg), lay, "CP")


def test_pipeline_sends_one_activation_and_one_gradient_per_micro_batch():
    cfg, p, m = M.BlockConfig(layers=3, batch=4), 3, 2
    world = mc.LocalWorld(p)
    world.run(checks.check_pp, m, cfg)
    lay = Layout(pp=p, microbatches=m, micro_batch=cfg.batch // m)
    assert sent(world, "send", src=1) == formula_bytes(like(cfg), lay, "PP")  # an interior stage


@pytest.mark.parametrize("zero, shard", [(0, None), (3, None), (3, 2)])
def test_data_parallel_traffic_matches_the_formulas(zero, shard):
    cfg, p = M.BlockConfig(batch=4, d=16, ffn=32), 4
    psi = sum(v.numel() for q in M.init_params(cfg) for v in q.values())
    assert psi % p == 0  # no padding: the formulas count exactly what moves
    world = mc.LocalWorld(p)
    if zero == 0:
        world.run(checks.check_dp, False, 1 << 30, cfg)
    else:
        world.run(checks.check_fsdp, p // (shard or p), True, cfg)
    lay = Layout(dp=p, zero=zero, shard=shard, micro_batch=cfg.batch // p)
    links = costs.Links.of(cluster("dgx_h100", 2))
    want = 0.0
    for c in traffic.data_parallel_comms(like(cfg), lay, psi, ("dp",) if shard is None else ("cp", "dp")):
        k = costs.cost(c, lay, links)
        want += (k.nvlink_bytes + k.network_bytes) * c.calls
    got = sent(world) / p  # rings split uneven counts unevenly: compare the mean over ranks
    assert got == pytest.approx(want)


def test_hierarchical_dispatch_sends_fewer_bytes_between_nodes():
    per_node = 4

    def inter(hierarchical):
        world = mc.LocalWorld(8)
        world.run(checks.check_ep, 2, hierarchical)
        return sum(e.nbytes for e in world.trace if e.src // per_node != e.dst // per_node)

    assert inter(True) < inter(False)


def test_bucketing_sends_one_all_reduce_per_bucket():
    cfg, p = M.BlockConfig(), 2
    n_tensors = sum(len(q) for q in M.init_params(cfg))
    for bucket_bytes, buckets in ((1, n_tensors), (1 << 30, 1)):
        world = mc.LocalWorld(p)
        world.run(checks.check_dp, False, bucket_bytes, cfg)
        messages = sum(1 for e in world.trace if e.collective == "all_reduce" and e.src == 0)
        assert messages == buckets * 2 * (p - 1)  # a ring all-reduce: 2 (p-1) messages per rank


def test_fsdp_prefetch_issues_the_next_gather_before_computing():
    cfg = M.BlockConfig(layers=3)

    def body(rank, prefetch):
        mesh = Mesh({"shard": 2})
        like = M.init_params(cfg)
        x, t = M.batch(cfg)
        log = []
        fsdp.fsdp_step(fsdp.shard_units(like, rank, 2), like, x, t, cfg, t.numel(), mesh, prefetch, log)
        return log

    with_p, without = (mc.run_local(body, 2, f)[0] for f in (True, False))
    assert with_p.index(("gather issued", 1)) < with_p.index(("compute", 0))
    assert without.index(("gather issued", 1)) > without.index(("compute", 0))
    alive = {name: max(v for e, v in log if e == "alive") for name, log in (("p", with_p), ("n", without))}
    assert alive == {"p": 2, "n": 1}


# --- the collective matmul -------------------------------------------------------------


@pytest.mark.parametrize("p", [1, 2, 3, 4])
def test_collective_matmul_equals_gather_then_matmul(p):
    def body(rank):
        g = torch.Generator().manual_seed(rank)
        x = torch.randn(3, 5, generator=g, dtype=torch.float64)
        w = torch.randn(5, 4, generator=torch.Generator().manual_seed(9), dtype=torch.float64)
        return [
            overlap.all_gather_matmul(x, w, overlap=o) for o in (True, False)
        ], overlap.gather_then_matmul(x, w)

    for (a, b), want in mc.run_local(body, p):
        assert torch.allclose(a, want) and torch.allclose(b, want)


def test_simulated_overlap_hides_the_gather_behind_a_long_enough_matmul():
    short = overlap.simulate(rows=1024, k=8192, m=256)  # small matmuls: the transfers dominate
    long = overlap.simulate(rows=1024, k=8192, m=8192)
    for e in (short, long):
        assert e.overlapped < e.sequential
        assert 0 <= e.hidden <= 1
        assert e.sequential == pytest.approx(e.all_gather + 8 * e.matmul_block)
    assert long.hidden > 0.9 > short.hidden
    # a step hides min(matmul, transfer): with short matmuls the hidden share is matmul / transfer
    t = long.transfer_steps[0]
    assert short.hidden == pytest.approx(7 * short.matmul_block / long.all_gather, rel=1e-6)
    assert t == short.transfer_steps[0]


# --- the calculator ------------------------------------------------------------------


def test_llama3_parameter_counts_match_the_published_configs():
    # Hugging Face config.json of each model: 8,030,261,248 / 70,553,706,496 / 405,853,388,800 parameters
    assert LLAMA3_8B.params == 8_030_261_248
    assert LLAMA3_70B.params == 70_553_706_496
    assert LLAMA3_405B.params == pytest.approx(405.85e9, rel=1e-4)


def test_byte_counts_recomputed_by_hand_for_llama3_8b():
    lay = Layout(tp=8, dp=4, micro_batch=1, microbatches=2)
    rows = {(c.strategy, c.collective): c for c in traffic.comms(LLAMA3_8B, lay)}
    tp_ar = rows[("TP", "all_reduce")]
    assert tp_ar.nbytes == 1 * 8192 * 4096 * 2  # one [s, b, h] activation in bf16
    assert tp_ar.calls == 4 * 32 * 2  # 4 per layer, 32 layers, 2 micro-batches
    per_layer = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096  # attention, MLP, norms
    embeddings = 2 * 128256 * 4096 + 4096
    dp_ar = rows[("DP", "all_reduce")]
    assert dp_ar.nbytes == (32 * per_layer + embeddings) / 8 * 2  # a GPU's gradients, bf16
    links = costs.Links.of(cluster("dgx_h100", 4))
    nv, net = 18 * 20.6e9, 400e9 / 8 * 12 / 12.5  # NCCL's usable NVLink 4 and NDR rates
    assert links.nvlink == pytest.approx(nv) and links.network == pytest.approx(net)
    t_tp = 2 * 7 / 8 * tp_ar.nbytes / nv + 2 * 7 * 3.4e-6 + 8.4e-6  # ring on NVLink, 14 steps
    assert costs.cost(tp_ar, lay, links).time == pytest.approx(t_tp)
    t_dp = 2 * 3 / 4 * dp_ar.nbytes / net + 2 * 3 * 14e-6 + 8.4e-6  # one GPU per node: ring on the network
    assert costs.cost(dp_ar, lay, links).time == pytest.approx(t_dp)
    assert costs.cost(dp_ar, lay, links).network_bytes == pytest.approx(2 * 3 / 4 * dp_ar.nbytes)


@pytest.mark.parametrize(
    "collective, algorithm",
    [
        ("all_reduce", "ring"),
        ("all_reduce", "hierarchical"),
        ("all_gather", "ring"),
        ("all_to_all", "pairwise"),
    ],
)
def test_group_simulation_of_one_group_is_the_simulator(collective, algorithm):
    topo = cluster("dgx_h100", 2)
    want = simulate(collective, algorithm, 1 << 24, topo, itemsize=2).time_s
    got = groupsim.simulate_groups(collective, 1 << 24, topo, [list(range(16))], algorithm=algorithm)
    assert got == pytest.approx(want, rel=1e-12)


def test_cost_model_agrees_with_the_simulator_where_groups_do_not_share_links():
    topo = cluster("dgx_h100", 4)
    links = costs.Links.of(topo)
    for lay in (Layout(tp=8, dp=4, micro_batch=1), Layout(tp=8, sp=True, dp=4, zero=3, micro_batch=1)):
        for c in traffic.comms(LLAMA3_8B, lay):
            model_t = costs.cost(c, lay, links).time
            sim_t = groupsim.simulate_comm(c, lay, topo)
            assert model_t == pytest.approx(sim_t, rel=1e-6), c


def test_the_simulator_sees_contention_the_model_does_not():
    """Data-parallel groups of two ranks per node on a fat tree with a 4:1 spine: eight groups
    share the spine, which the per-GPU model ignores and the simulator charges."""
    topo = cluster("dgx_h100", 4, fabric="fat_tree", nodes_per_leaf=1, oversubscription=4)
    lay = Layout(tp=4, dp=8, micro_batch=1)
    c = next(c for c in traffic.comms(LLAMA3_8B, lay) if c.strategy == "DP")
    assert groupsim.simulate_comm(c, lay, topo) > 1.5 * costs.cost(c, lay, costs.Links.of(topo)).time


def test_layouts_refuse_what_the_model_cannot_split():
    with pytest.raises(ValueError, match="heads \\(32\\) not divisible by tp=3"):
        traffic.comms(LLAMA3_8B, Layout(tp=3))
    with pytest.raises(ValueError, match="sp=True needs tp > 1"):
        Layout(sp=True)
    with pytest.raises(ValueError, match="ep=4 must divide dp=2"):
        Layout(dp=2, ep=4)
    with pytest.raises(ValueError, match="needs zero=3"):
        Layout(dp=4, shard=2)
    with pytest.raises(ValueError, match="no network"):
        step_time(LLAMA3_8B, Layout(tp=8, dp=2), dgx_h100())


def test_step_time_responds_to_its_knobs():
    topo = cluster("dgx_h100", 2)
    base = Layout(tp=8, sp=True, pp=4, dp=16, zero=1, microbatches=8)
    r = step_time(LLAMA3_70B, base, topo)
    assert step_time(LLAMA3_70B, base, topo, overlap=False).step > r.step
    assert step_time(LLAMA3_70B, base, topo, async_tp=True).step < r.step
    more_micro = Layout(tp=8, sp=True, pp=4, dp=16, zero=1, microbatches=32)
    assert step_time(LLAMA3_70B, more_micro, topo).bubble / 4 < r.bubble  # (p-1)/m shrinks
    assert math.isclose(r.compute + r.exposed + r.bubble, r.step)
    fsdp_mem = step_time(LLAMA3_8B, Layout(dp=64, zero=3), topo).memory
    ddp_mem = step_time(LLAMA3_8B, Layout(dp=64, zero=0), topo).memory
    assert fsdp_mem["optimizer"] == pytest.approx(ddp_mem["optimizer"] / 64)
    assert ddp_mem["parameters"] + ddp_mem["gradients"] + ddp_mem["optimizer"] == pytest.approx(
        16 * LLAMA3_8B.params
    )


def test_model_states_match_the_16_bytes_per_parameter_rule():
    for m in (LLAMA3_8B, LLAMA3_70B, LLAMA3_405B):
        mem = step_time(m, Layout(dp=8), cluster("dgx_h100", 2)).memory
        assert mem["parameters"] + mem["gradients"] + mem["optimizer"] == pytest.approx(16 * m.params)


def test_widget_panel_is_shown_only_with_a_frontend(monkeypatch):
    from mycollectives.book.parallel.plots import has_frontend

    monkeypatch.setenv("MYCOLLECTIVES_WIDGETS", "0")
    assert not has_frontend()
    monkeypatch.setenv("MYCOLLECTIVES_WIDGETS", "1")
    assert has_frontend()
    monkeypatch.delenv("MYCOLLECTIVES_WIDGETS")
    assert not has_frontend()  # plain Python: no kernel


def test_plots_draw():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mycollectives.book.parallel.plots import plot_link_bytes, plot_steps

    topo = cluster("dgx_h100", 2)
    reports = [step_time(LLAMA3_8B, Layout(tp=8, dp=8, zero=z), topo) for z in (0, 3)]
    ax = plot_steps(reports)
    assert len(ax.patches) >= 4
    plot_link_bytes(reports[0])
    plt.close("all")
    assert np.isfinite([r.step for r in reports]).all()


def test_a_layout_that_does_not_fit_shows_no_mfu_in_table_or_figure():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mycollectives.book.parallel.plots import plot_steps

    r = step_time(LLAMA3_70B, Layout(dp=16), cluster("dgx_h100", 2))  # 16 bytes per parameter, unsharded
    assert not r.fits and "does not fit" in r.table() and "MFU" not in r.table()
    ax = plot_steps([r])
    texts = [t.get_text() for t in ax.texts]
    plt.close("all")
    assert any("does not fit" in t for t in texts) and not any("MFU" in t for t in texts)


def test_log_ticks_are_plain_numbers_that_do_not_touch():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mycollectives.book.parallel.plots import log_ticks

    _, ax = plt.subplots()
    values = [1, 2, 3, 4, 8, 16, 17]
    ax.plot(values, values)
    log_ticks(ax, values)
    ax.figure.canvas.draw()
    labels = [t.get_text() for t in ax.get_xticklabels() if t.get_visible()]
    minor = ax.xaxis.get_minorticklocs()
    plt.close("all")
    assert labels == ["1", "2", "4", "8", "16"] and len(minor) == 0  # 3 would touch 2, 17 16


def test_layouts_that_differ_describe_differently():
    a = Layout(tp=8, sp=True, pp=4, dp=4, microbatches=8)
    others = [
        Layout(tp=8, sp=True, pp=4, dp=4, microbatches=16),
        Layout(tp=8, sp=True, pp=4, dp=4, microbatches=8, recompute="full"),
        Layout(tp=8, sp=True, pp=4, dp=4, microbatches=8, micro_batch=2),
    ]
    assert len({lay.describe() for lay in [a, *others]}) == 4
    assert a.describe() == "tp8+sp pp4 dp4, 8 micro-batches, selective recompute"


def test_llama3_405b_stages_and_the_memory_of_its_busiest_stage():
    lay = Layout(tp=8, sp=True, pp=16, dp=128, zero=1, microbatches=16)
    assert lay.stage_layers(LLAMA3_405B) == [7] + [8] * 14 + [7]  # Dubey et al. 2024, section 3.3.2
    r = step_time(LLAMA3_405B, lay, cluster("dgx_h100", 2))
    # stage 1 (8 layers, 15 micro-batches in flight) holds the most, not stage 0 (7 layers, 16)
    per_layer_microbatch = r.memory["activations"] / (8 * 15)
    assert r.memory["activations"] > 7 * 16 * per_layer_microbatch
    assert r.fits  # the run the paper reports fitted in 80 GB
    interleaved = step_time(LLAMA3_405B, Layout(tp=8, sp=True, pp=16, dp=128, zero=1, microbatches=16, virtual=2),
                            cluster("dgx_h100", 2))  # fmt: skip
    assert interleaved.memory["activations"] > r.memory["activations"]  # more in flight on the first stage


def test_overlap_fractions_move_the_step_between_its_bounds():
    from mycollectives.steptime.calculator import Overlap

    topo, lay = cluster("dgx_h100", 2), Layout(dp=64, zero=3, microbatches=8)
    steps = [step_time(LLAMA3_8B, lay, topo, overlap=o).step for o in (True, Overlap(fsdp=0.5), False)]
    assert steps[0] < steps[1] < steps[2]
    lay = Layout(tp=8, sp=True, dp=8, zero=3, microbatches=4)
    assert step_time(LLAMA3_70B, lay, topo, overlap=Overlap(tensor=1.0)).step == pytest.approx(
        step_time(LLAMA3_70B, lay, topo, async_tp=True).step
    )
    with pytest.raises(ValueError, match="fsdp must be a fraction"):
        Overlap(fsdp=1.5)


def test_widget_panel_builds_and_redraws_on_a_slider_change(monkeypatch):
    pytest.importorskip("ipywidgets")
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mycollectives.book.parallel.plots import panel

    box = panel(LLAMA3_8B, cluster("dgx_h100", 2), gpus=64, layout=Layout(tp=8, dp=8))
    sliders = [w for row in box.children[:2] for w in row.children]
    tp_slider = next(w for w in sliders if w.description == "tp")
    tp_slider.value = 4  # redraws: tp 4 x dp 16
    cp_slider = next(w for w in sliders if w.description == "cp")
    cp_slider.value = 32  # tp x cp = 128 > 64 GPUs: the panel prints why, and raises nothing
    plt.close("all")
