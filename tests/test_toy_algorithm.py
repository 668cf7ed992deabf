"""Adding an algorithm is one builder, a collective its record, builder and API
function: the recipes of the appendix, held to their word.

A toy algorithm, registered by a fixture and by nothing else, must be
verified, executed on a local world and on gloo processes, costed, picked by
``auto``, simulated, drawn and benchmarked, with no other edit anywhere.
The toy is the one-shot all-reduce: every rank sends its whole vector to
every other rank in one round, and each adds up what it receives; it has no
closed form. A toy collective (an inclusive scan) is registered the same way,
and both go through the suite's collective-generic test bodies (verify,
the local run against the oracle, the cost tests, auto, simulate, draw).
"""

from __future__ import annotations

import cases
import numpy as np
import pytest
import test_cost
import test_local
import test_verify
import torch

import mycollectives as mc
from mycollectives import auto
from mycollectives.algorithms import Spec, algorithms, build, register, schedule_for, unregister
from mycollectives.api.core import Meta, launch
from mycollectives.collectives import COLLECTIVE, Collective, add_record, canonical, record, remove_record
from mycollectives.cost import Machine, closed_form, counted_cost, predict
from mycollectives.ops import resolve_op
from mycollectives.schedule import WORK, Round

TOY = "toy_one_shot"


def one_shot(spec: Spec) -> list[Round]:
    """Every rank sends its whole vector to every other rank, which adds it in."""
    p = spec.world_size
    src, dst = np.divmod(np.arange(p * p), p)
    keep = src != dst
    return [Round.of(src[keep], dst[keep], 0, spec.count, reduce=True)]


def ensure_registered() -> None:
    """Register the toy if this process has not (the fixture, or a spawned rank)."""
    if TOY not in algorithms("all_reduce"):
        register("all_reduce", TOY)(one_shot)


@pytest.fixture
def toy():
    ensure_registered()
    auto.choose.cache_clear()
    yield TOY
    unregister("all_reduce", TOY)
    auto.choose.cache_clear()


def test_the_toy_is_verified_for_p_1_to_16(toy):
    for p in range(1, 17):
        for n in (0, 1, p + 3):
            mc.verify(build(Spec("all_reduce", p, count=n), toy))


def test_the_toy_runs_on_a_local_world(toy):
    def fn(rank):
        t = torch.arange(5.0) + rank
        mc.all_reduce(t, algorithm=toy)
        return t.tolist()

    assert mc.run_local(fn, 3) == [[3.0, 6.0, 9.0, 12.0, 15.0]] * 3


def gloo_task(rank: int) -> bool:
    """On a spawned gloo rank: the toy against torch.distributed's all-reduce."""
    import torch.distributed as dist

    ensure_registered()
    x = torch.arange(7.0) * (rank + 1)
    want = x.clone()
    dist.all_reduce(want)
    mc.all_reduce(x, algorithm=TOY)
    return bool(torch.equal(x, want))


@pytest.mark.multiprocess
@pytest.mark.timeout(180)
def test_the_toy_runs_on_gloo(toy):
    assert mc.run_gloo(gloo_task, 3, timeout=120) == [True] * 3


def test_the_toy_is_costed_from_its_schedule_without_a_formula(toy):
    m = Machine(alpha=1.0, beta=1e-3, gamma=1e-4)
    p, n = 4, 1000
    # one round: each rank sends and receives p-1 whole vectors and adds p-1 of them
    want = (p - 1) * (m.alpha + 4 * n * m.beta + 4 * n * m.gamma)
    assert counted_cost(build(Spec("all_reduce", p, count=n), toy), m) == pytest.approx(want)
    with pytest.raises(KeyError):
        closed_form("all_reduce", toy, p, n, m)  # no formula: auto does not need one
    assert toy in predict("all_reduce", p, 4 * n, m)


def test_auto_picks_the_toy_where_it_is_cheapest(toy):
    # three ranks, a small vector: one round of two messages, where recursive
    # doubling folds the third rank in and out (three rounds)
    assert auto.choose("all_reduce", 3, 64) == toy
    assert auto.choose("all_reduce", 3, 64 << 20) != toy  # large: it moves (p-1) vectors per rank
    world = mc.LocalWorld(3)
    world.run(lambda rank: mc.all_reduce(torch.ones(16)))
    assert {e.algorithm for e in world.trace if e.collective == "all_reduce"} == {toy}


def test_the_toy_is_simulated_and_drawn(toy):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    from mycollectives import viz
    from mycollectives.sim import simulate
    from mycollectives.topology import dgx_h100

    r = simulate("all_reduce", toy, 1 << 20, dgx_h100())
    assert r.time_s > 0 and len(r.round_time) == 1
    sched = schedule_for("all_reduce", toy, 4, 1 << 10)
    viz.draw_buffers(sched)
    assert "<" in viz.to_html(viz.animate(sched))


def bench_task(rank: int) -> list:
    """On a spawned gloo rank: the bench's sweep with the toy and the native all-reduce."""
    from mycollectives.bench.runner import run_sweep

    ensure_registered()
    results = run_sweep("all_reduce", [1024, 65536], [TOY, "native"], iters=2, warmup=1, reps=2)
    return [(r.algorithm, r.size, r.wrong, r.time_us > 0) for r in results]


@pytest.mark.multiprocess
@pytest.mark.timeout(180)
def test_the_toy_is_benchmarked(toy):
    rows = mc.run_gloo(bench_task, 2, timeout=120)[0]
    assert {(a, n) for a, n, _, _ in rows} == {(a, n) for a in (TOY, "native") for n in (1024, 65536)}
    assert all(wrong == 0 and timed for _, _, wrong, timed in rows)


# --- a toy collective: a record, a builder and an API function, registered here ---
#
# Inclusive scan (MPI_Scan): rank r ends with the reduction of the inputs of
# ranks 0..r. torch.distributed has no such call, so the tests compare it with
# the record's oracle; nothing in the package or the suite names it.

SCAN = "toy_scan"  # not "scan": the appendix adds a real one under that name


class Scan(Collective):
    name, reducing, in_place, in_torch = SCAN, True, True, False
    forms = {SCAN: lambda fn, c: c.lib.toy_scan(c.out, c.op, c.group, **c.kw)}

    def oracle(self, spec, inputs, reduce):
        return [reduce(np.stack(inputs[: r + 1])) for r in range(spec.world_size)]

    def bound(self, p):
        return 1.0  # the last rank must receive a whole vector


def chain(spec: Spec) -> list[Round]:
    """Rank k adds the prefix it received into its own and passes it on to k + 1."""
    return [Round.of([k], [k + 1], 0, spec.count, reduce=True) for k in range(spec.world_size - 1)]


@torch.no_grad()
def scan(tensor, op=mc.ReduceOp.SUM, group=None, async_op=False, *, algorithm="auto", **options):
    """Inclusive prefix reduction of ``tensor`` over ranks 0..rank, in place."""

    def validate(c, t):
        c.tensor("tensor", tensor)
        return Meta(tensor.dtype, tensor.numel(), op=resolve_op(op))

    def body(job) -> None:
        job.run({WORK: tensor.view(-1)}, as_given=True)
        if job.meta.op is mc.ReduceOp.AVG:
            tensor.div_(job.transport.rank + 1)

    return launch(SCAN, group, algorithm, options, validate, body, async_op, [tensor])


def ensure_scan() -> None:
    """Register the toy collective in this process (the fixture, or a spawned rank)."""
    if SCAN not in COLLECTIVE:
        add_record(Scan())
        register(SCAN, "chain")(chain)
        mc.toy_scan = mc.api.toy_scan = (
            scan  # where a real one is exported: mycollectives.api and the package
        )


@pytest.fixture
def toy_collective():
    ensure_scan()
    auto.choose.cache_clear()
    yield SCAN
    unregister(SCAN, "chain")
    remove_record(SCAN)
    del mc.toy_scan, mc.api.toy_scan
    auto.choose.cache_clear()


def test_the_toy_collective_needs_no_edit_elsewhere(toy_collective):
    from mycollectives import collectives

    assert SCAN in collectives.FUNCTIONS and algorithms(SCAN) == ("chain",)
    assert canonical(SCAN) == SCAN and record(SCAN).functions == (SCAN,)
    assert auto.choose(SCAN, 4, 1 << 10) == "chain"


# The suite's collective-generic test bodies, run on both toys.
GENERIC = [("all_reduce", TOY), (SCAN, "chain")]


@pytest.fixture
def toys(toy, toy_collective):
    return GENERIC


def test_generic_verify(toys):
    for c, a in toys:
        test_verify.check_verifies(c, a)


@pytest.mark.parametrize("p", [1, 2, 3, 5, 8])
def test_generic_local_run_against_the_oracle(toys, p):
    for c, a in toys:
        test_local.test_each_algorithm_on_awkward_counts(c, a, p)


def test_generic_local_run_every_dtype_and_op(toys):
    for c, a in toys:
        for dtype in cases.DTYPES:
            for op in cases.ops_for(dtype):
                test_local.check_local(cases.Case(c, a, 4, 7, dtype, op, seed=len(op)))


def test_generic_cost_and_auto(toys):
    for c, a in toys:
        test_cost.check_counted_cost(c, a)
        test_cost.test_auto_choice_is_on_the_menu_and_deterministic(c)
        with pytest.raises(KeyError):
            closed_form(c, a, 4, 100, Machine())  # none, and none needed


def test_generic_simulate_and_draw(toys):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    from mycollectives import viz
    from mycollectives.collectives import labelled_outputs
    from mycollectives.sim import simulate
    from mycollectives.topology import dgx_h100

    for c, a in toys:
        r = simulate(c, a, 1 << 20, dgx_h100())
        assert r.time_s > 0 and np.isfinite(r.busbw), (c, a)
        sched = schedule_for(c, a, 4, 1 << 10)
        final = viz.buffer_states(sched)[-1]  # the pictures end where the oracle says
        for rank, want in enumerate(labelled_outputs(Spec(c, 4, count=sched.params["count"]))):
            assert want is None or (final[rank][: len(want[1])] == want[1]).all(), (c, rank)
        viz.draw_buffers(sched)
        assert "<" in viz.to_html(viz.animate(sched))


def scan_bench_task(rank: int) -> list:
    """On a spawned gloo rank: the bench's sweep of the toy collective (torch has no native one)."""
    from mycollectives.bench.runner import run_sweep

    ensure_scan()
    results = run_sweep(SCAN, [1024], ["chain", "native"], iters=2, warmup=1, reps=2)
    return [(r.algorithm, r.wrong) for r in results]


@pytest.mark.multiprocess
@pytest.mark.timeout(180)
def test_the_toy_collective_is_benchmarked_and_natively_absent(toy_collective):
    assert mc.run_gloo(scan_bench_task, 3, timeout=120)[0] == [("chain", 0)]


def test_the_toy_collective_is_benchmarked_on_a_virtual_cluster_with_no_native_column(toy_collective, capsys):
    """The bench's choices are read from the records now, and NCCL has no toy scan: no 'native' column."""
    from mycollectives.bench import cli
    from mycollectives.bench.report import parse_table

    cli.main(
        ["-C", SCAN, "--virtual", "dgx_h100", "-b", "1K", "-e", "4K", "-n", "1", "-w", "0", "--data", "1"]
    )
    out = capsys.readouterr().out
    names = next(ln for ln in out.splitlines() if "chain" in ln).split()
    assert names == ["#", "auto", "chain"], out
    rows = parse_table(out)
    assert [int(r[0]) for r in rows] == [1024, 2048, 4096]
    assert all(len(r) == 5 + 4 * 2 and r[8] == r[12] == "0" for r in rows), out  # #wrong, data checked
