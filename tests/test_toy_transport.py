"""A new transport is one subclass and one entry of ``TRANSPORTS``: nothing else is edited.

The toy below counts the bytes it sends and otherwise is the process group's
own send and receive. Added to the table (for the test's length only, with
``monkeypatch``), it carries every collective of the package, on the whole
group and on subgroups, under the bench (``--transport toy``), under
``torchpg`` (``torch.distributed`` calls in a thread world over it, its
``new_group``\\ s included) and under ``parallel`` (a mesh's groups), on 4
gloo processes. Each rank's tasks run here, in the pool's processes.
"""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from cases import Case, compare, inputs, oracle, spec

import mycollectives as mc
from mycollectives.collectives import records
from mycollectives.transport import TRANSPORT_ENV, TRANSPORTS
from mycollectives.transport.torch_dist import TorchDistTransport


class CountingTransport(TorchDistTransport):
    """The process group's own send and receive, counting the bytes this rank sends."""

    sent = 0

    def isend(self, tensor, dst, tag=0, label=None):
        self.sent += tensor.numel() * tensor.element_size()
        return super().isend(tensor, dst, tag, label)


def counting(group, timeout):
    return CountingTransport(group)


# --- what each rank runs (in the pool's processes) ---------------------------------------------


def _with_toy(rank: int, task):
    """``task(toy)`` with the toy an entry of TRANSPORTS and chosen by MYCOLLECTIVES_TRANSPORT."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(TRANSPORTS, "toy", counting)
        mp.setenv(TRANSPORT_ENV, "toy")
        group = dist.new_group(list(range(dist.get_world_size())))  # a fresh group: no transport cached yet
        toy = mc.transport.transport_for(group)
        assert type(toy) is CountingTransport, type(toy)
        return task(toy, group)


def _run(lib, c, case: Case, group, rank: int, root: int, **kw) -> str | None:
    """``case`` through ``lib`` on ``group`` (this rank is ``rank`` there, the root named ``root``),
    compared with the record's oracle; what differs, or None."""
    s = spec(case)
    inp = inputs(case, rank)
    out = inp if c.in_place else torch.zeros(sum(n for *_, n in c.output_at(s, rank)), dtype=inp.dtype)
    op = getattr(lib.ReduceOp, case.op) if case.op else None
    c.call(lib, inp, out, op, root, group, rank, spec=s, function=c.functions[0], **kw)
    got = [out.numpy().copy()] if c.has_output(s, rank) else []
    return compare(case, rank, got, oracle(case)[rank])


def _every_collective(lib, group, rank: int, p: int, root: int, torch_only: bool = False, **kw) -> list:
    problems = []
    for c in records():
        if c.bound(2) == 0 or (torch_only and not c.in_torch):  # a barrier moves no data
            continue
        case = Case(c.functions[0], "auto", p, 6, op="SUM" if c.reducing else None)
        problems.append(_run(lib, c, case, group, rank, root, **kw))
    return [x for x in problems if x]


def bench_task(rank: int) -> tuple[list, int, int]:
    """Every collective that moves data through the bench's body, with ``--transport toy``."""
    from mycollectives.bench.cli import bench, data_collectives, parser

    def task(toy, group):
        wrong, rows = [], 0
        for name in data_collectives():
            argv = ["-C", name, "-b", "1K", "-e", "4K", "-f", "4", "-n", "1", "-w", "0", "--reps", "1"]
            results = bench(parser().parse_args([*argv, "--progress", "0", "--transport", "toy"]))
            wrong += [f"{r.collective} {r.algorithm} {r.size}" for r in results if r.wrong]
            rows += len(results)
        return wrong, rows, mc.transport.transport_for(None).sent  # the default group's transport: a toy

    return _with_toy(rank, task)


def parallel_task(rank: int) -> tuple[list, int, int]:
    """Every collective on each of a 2 x 2 mesh's groups (two streams), the mesh over the toy."""
    from mycollectives.parallel.mesh import Mesh

    def task(toy, group):
        mesh = Mesh({"dp": 2, "tp": 2}, group=group)
        problems, before = [], toy.sent
        for axis in ("dp", "tp"):
            for stream in (0, 1):
                sub = mesh.group(axis, stream=stream)
                problems += _every_collective(mc, sub, sub.rank, 2, sub.members[0])
        return problems, toy.sent - before, len(mesh.group("tp").members)

    return _with_toy(rank, task)


def torchpg_task(rank: int) -> tuple[list, int]:
    """``torch.distributed`` in a thread world over the toy: every collective torch has, on the
    default group and on a ``new_group`` of two ranks (the toy's generic subgroup)."""
    from mycollectives.torchpg import thread_world

    def task(toy, group):
        before = toy.sent
        with thread_world(transport=toy):
            problems = _every_collective(dist, None, rank, 4, 0, torch_only=True)
            pairs = [dist.new_group([0, 1]), dist.new_group([2, 3])]
            mine = pairs[rank // 2]
            problems += _every_collective(dist, mine, rank % 2, 2, rank // 2 * 2, torch_only=True)
        return problems, toy.sent - before

    return _with_toy(rank, task)


# --- the tests ---------------------------------------------------------------------------------

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def pool():
    from distpool import Pools

    pools = Pools(__name__)
    yield pools
    pools.close()


def test_the_toy_is_a_short_subclass_and_one_table_entry():
    import inspect

    assert len(inspect.getsource(CountingTransport).splitlines()) + 2 < 30
    assert "toy" not in TRANSPORTS  # added only while the tasks run


def test_the_bench_takes_its_transports_from_the_table(monkeypatch):
    from mycollectives.bench.cli import parser

    monkeypatch.setitem(TRANSPORTS, "toy", counting)
    assert parser().parse_args(["--transport", "toy"]).transport == "toy"


def test_every_collective_runs_under_the_bench_on_the_toy(pool):
    for wrong, rows, sent in pool.everywhere(4, "bench_task", timeout=540):
        assert wrong == [] and rows > 0
        assert sent > 0  # the bytes went through the toy


def test_every_collective_runs_on_a_meshs_subgroups_over_the_toy(pool):
    for problems, sent, tp in pool.everywhere(4, "parallel_task", timeout=300):
        assert problems == [] and tp == 2
        assert sent > 0


def test_every_collective_runs_under_torchpg_over_the_toy(pool):
    for problems, sent in pool.everywhere(4, "torchpg_task", timeout=300):
        assert problems == []
        assert sent > 0
