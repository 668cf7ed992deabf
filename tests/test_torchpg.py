"""torch.distributed on thread ranks (mycollectives.torchpg): dist.* calls, new_group, DDP, FSDP2.

Each call's result is checked against values computed independently here, and
DDP's and FSDP2's weights after a few steps against one process training on
the whole batch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from torch import nn

import mycollectives as mc
from mycollectives.torchpg import ThreadProcessGroup, Unsupported, run_dist, thread_world

pytestmark = pytest.mark.timeout(120)


def _collectives(rank: int) -> dict:
    p = dist.get_world_size()
    out: dict = dict(rank=dist.get_rank(), size=p, init=dist.is_initialized(), backend=dist.get_backend())
    t = torch.tensor([rank + 1.0, 2.0 * rank])
    dist.all_reduce(t)
    out["all_reduce"] = t.tolist()
    t = torch.tensor([rank + 1.0])
    dist.all_reduce(t, op=dist.ReduceOp.MAX, async_op=True).wait()
    out["all_reduce_max"] = t.item()
    b = torch.tensor([float(rank), -1.0])
    dist.broadcast(b, src=p - 1)
    out["broadcast"] = b.tolist()
    gathered = [torch.zeros(2) for _ in range(p)]
    dist.all_gather(gathered, torch.tensor([rank, rank + 0.5]))
    out["all_gather"] = [g.tolist() for g in gathered]
    flat = torch.zeros(2 * p)
    dist.all_gather_into_tensor(flat, torch.tensor([rank, rank + 0.5]))
    out["all_gather_into_tensor"] = flat.tolist()
    rs = torch.zeros(2)
    dist.reduce_scatter_tensor(rs, torch.arange(2.0 * p) + rank)
    out["reduce_scatter_tensor"] = rs.tolist()
    a2a = torch.zeros(p)
    dist.all_to_all_single(a2a, torch.arange(float(p)) + 10 * rank)
    out["all_to_all_single"] = a2a.tolist()
    r = torch.tensor([float(rank)])
    dist.reduce(r, dst=0)
    out["reduce_root"] = r.item() if rank == 0 else None
    objs: list = [None] * p
    dist.all_gather_object(objs, {"rank": rank})
    out["all_gather_object"] = objs
    dist.barrier()
    return out


@pytest.mark.filterwarnings("ignore:`torch.distributed.*` is deprecated:FutureWarning")
@pytest.mark.parametrize("p", [2, 3, 4])
def test_collectives_match_expected(p: int) -> None:
    got = run_dist(_collectives, p, timeout=30)
    tri = p * (p - 1) / 2
    for rank, out in enumerate(got):
        assert (out["rank"], out["size"], out["init"], out["backend"]) == (rank, p, True, "mycollectives")
        assert out["all_reduce"] == [tri + p, 2 * tri]
        assert out["all_reduce_max"] == p
        assert out["broadcast"] == [p - 1.0, -1.0]
        assert out["all_gather"] == [[r, r + 0.5] for r in range(p)]
        assert out["all_gather_into_tensor"] == [v for r in range(p) for v in (r, r + 0.5)]
        assert out["reduce_scatter_tensor"] == [p * (2 * rank + k) + tri for k in range(2)]
        assert out["all_to_all_single"] == [rank + 10.0 * s for s in range(p)]
        assert out["all_gather_object"] == [{"rank": r} for r in range(p)]
    assert got[0]["reduce_root"] == tri


def _point_to_point(rank: int) -> list:
    p = dist.get_world_size()
    nxt, prv = (rank + 1) % p, (rank - 1) % p
    mine, got = torch.tensor([rank * 1.0, rank + 0.25]), torch.zeros(2)
    if rank % 2 == 0:  # blocking send/recv, in an order that cannot deadlock
        dist.send(mine, dst=nxt)
        dist.recv(got, src=prv)
    else:
        dist.recv(got, src=prv)
        dist.send(mine, dst=nxt)
    ring = got.tolist()
    other = torch.zeros(1)
    works = [dist.isend(torch.tensor([100.0 + rank]), dst=prv, tag=7), dist.irecv(other, src=nxt, tag=7)]
    for w in works:
        w.wait()
    return [ring, other.item()]


@pytest.mark.parametrize("p", [2, 4])
def test_send_recv_and_isend_irecv(p: int) -> None:
    got = run_dist(_point_to_point, p, timeout=30)
    for rank, (ring, other) in enumerate(got):
        prv, nxt = (rank - 1) % p, (rank + 1) % p
        assert ring == [prv * 1.0, prv + 0.25]
        assert other == 100.0 + nxt


def _groups(rank: int) -> dict:
    evens = dist.new_group([0, 2])
    odds = dist.new_group([1, 3])
    mine = evens if rank % 2 == 0 else odds
    t = torch.tensor([rank + 1.0])
    dist.all_reduce(t, group=mine)  # the two groups run at once, on the same ranks' transports
    w = torch.tensor([1.0])
    dist.all_reduce(w)  # the default group still spans everyone
    out = dict(
        sum=t.item(), world=w.item(), group_rank=dist.get_rank(mine), group_size=dist.get_world_size(mine)
    )
    b = torch.tensor([float(rank)])
    dist.broadcast(b, src=3, group=odds) if rank % 2 else dist.broadcast(b, src=2, group=evens)
    out["bcast"] = b.item()
    m = torch.tensor([10.0 * rank])
    mc.all_reduce(m, group=mine)  # the package's own call on a torch group: the same transport
    out["mc"] = m.item()
    out["not_member"] = dist.get_rank(evens) if rank % 2 else None
    return out


def test_new_group_subgroups_and_package_calls_on_them() -> None:
    got = run_dist(_groups, 4, timeout=30)
    for rank, out in enumerate(got):
        members = [0, 2] if rank % 2 == 0 else [1, 3]
        assert out["sum"] == sum(r + 1.0 for r in members)
        assert out["world"] == 4.0
        assert (out["group_rank"], out["group_size"]) == (members.index(rank), 2)
        assert out["bcast"] == float(members[-1])
        assert out["mc"] == sum(10.0 * r for r in members)
        if rank % 2:
            assert out["not_member"] == -1


def _more(rank: int) -> dict:
    import torch.distributed._functional_collectives as funcol
    from torch.distributed.device_mesh import init_device_mesh

    p = dist.get_world_size()
    got = torch.zeros(1)
    ops = [
        dist.P2POp(dist.isend, torch.tensor([float(rank)]), (rank + 1) % p),
        dist.P2POp(dist.irecv, got, (rank - 1) % p),
    ]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    tp = torch.tensor([float(rank)])
    dist.all_reduce(tp, group=mesh.get_group("tp"))
    part = torch.zeros(2)
    dist.scatter(part, [torch.full((2,), 10.0 * r) for r in range(p)] if rank == 0 else None, src=0)
    gathered = [torch.zeros(2) for _ in range(p)] if rank == 3 else None
    dist.gather(part + 1, gathered, dst=3)
    objs = [{"from": 0}] if rank == 0 else [None]
    dist.broadcast_object_list(objs, src=0)
    return dict(
        batch=got.item(),
        funcol=funcol.all_reduce(torch.tensor([1.0 + rank]), "sum", dist.group.WORLD).item(),
        tp=tp.item(),
        scatter=part.tolist(),
        gather=[g.tolist() for g in gathered] if gathered else None,
        obj=objs[0],
    )


def test_batch_p2p_functional_collectives_device_mesh_scatter_gather() -> None:
    got = run_dist(_more, 4, timeout=30)
    for rank, out in enumerate(got):
        assert out["batch"] == (rank - 1) % 4
        assert out["funcol"] == 10.0
        assert out["tp"] == (1.0 if rank < 2 else 5.0)  # tp groups {0, 1} and {2, 3}
        assert out["scatter"] == [10.0 * rank] * 2
        assert out["obj"] == {"from": 0}
    assert got[3]["gather"] == [[10.0 * r + 1] * 2 for r in range(4)]


def test_a_torchrun_script_that_initialises_its_own_group_runs_unchanged() -> None:
    def script(rank: int) -> float:
        dist.init_process_group("gloo")  # as under torchrun: here the thread's world is set up already
        pair = dist.new_group([0, 2], backend="gloo")  # a group of the thread world all the same
        t = torch.ones(1)
        if rank != 1:
            dist.all_reduce(t, group=pair)
        dist.all_reduce(t)
        dist.destroy_process_group()
        return t.item()

    assert run_dist(script, 3, timeout=30) == [5.0, 5.0, 5.0]
    for fn in (dist.init_process_group, dist.new_group):
        assert fn.__module__ == "torch.distributed.distributed_c10d"  # torch's own again


def test_unsupported_and_misuse_are_refused_clearly() -> None:
    def any_source(rank: int) -> None:
        if rank == 0:
            dist.recv(torch.zeros(1))

    with pytest.raises(Unsupported, match="from any source"):
        run_dist(any_source, 2, timeout=10)
    with pytest.raises(ValueError, match="no rank of a local world"):
        with thread_world():
            pass

    def wrong_rank(rank: int) -> None:
        with thread_world(rank + 1, 2):
            pass

    with pytest.raises(ValueError, match="rank=1 but"):
        mc.run_local(wrong_rank, 2, timeout=10)
    assert not dist.is_initialized()  # the main thread's world was never touched


# -- DDP and FSDP2 against one process on the whole batch ---------------------------------------

W, STEPS, PER_RANK = 32, 3, 4


def _model() -> nn.Module:
    """The same weights on every rank: drawn from a generator of our own, since ranks that are
    threads share torch's global one (seeding it in each thread races)."""
    g = torch.Generator().manual_seed(0)
    model = nn.Sequential(*[m for _ in range(4) for m in (nn.Linear(W, W), nn.Tanh())], nn.Linear(W, 1))
    with torch.no_grad():
        for q in model.parameters():
            q.uniform_(-(W**-0.5), W**-0.5, generator=g)
    return model


def _batch(step: int, p: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(step)
    return torch.randn(p * PER_RANK, W, generator=g), torch.randn(p * PER_RANK, 1, generator=g)


def _reference(p: int) -> list[torch.Tensor]:
    m = _model()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    for s in range(STEPS):
        x, y = _batch(s, p)
        opt.zero_grad()
        nn.functional.mse_loss(m(x), y).backward()
        opt.step()
    return [q.detach() for q in m.parameters()]


def _train(rank: int, model: nn.Module) -> None:
    p = dist.get_world_size()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for s in range(STEPS):
        x, y = _batch(s, p)
        opt.zero_grad()
        nn.functional.mse_loss(model(x.chunk(p)[rank]), y.chunk(p)[rank]).backward()
        opt.step()


def _counting_hook(state: dict, bucket):  # DDP inspects a hook's annotations: none here
    state["buckets"].add(bucket.index())
    p = dist.get_world_size()  # here, not in the callback (which may run on another thread on GPUs)
    fut = dist.all_reduce(bucket.buffer(), async_op=True).get_future()
    return fut.then(lambda f: f.value()[0].div_(p))


def _ddp(rank: int, hook: bool) -> tuple[list, int]:
    from torch.nn.parallel import DistributedDataParallel

    model = DistributedDataParallel(_model(), bucket_cap_mb=0.5 * W * W * 4 / 2**20)
    state: dict = {"buckets": set()}
    if hook:
        model.register_comm_hook(state, _counting_hook)
    _train(rank, model)
    return [q.detach() for q in model.module.parameters()], len(state["buckets"])


@pytest.mark.parametrize("hook", [False, True], ids=["buckets", "comm_hook"])
def test_ddp_averages_gradients_like_one_process(hook: bool) -> None:
    p = 3
    want = _reference(p)
    got = run_dist(_ddp, p, hook, timeout=60)
    for rank, (params, buckets) in enumerate(got):
        for k, (a, b) in enumerate(zip(params, want)):
            torch.testing.assert_close(
                a, b, rtol=1e-5, atol=1e-6, msg=lambda m, k=k, r=rank: f"rank {r} param {k}: {m}"
            )
        if hook:
            assert buckets >= 3, f"expected several buckets, the hook saw {buckets}"


def _fsdp(rank: int) -> list:
    from torch.distributed.fsdp import fully_shard

    model = _model()
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer)
    fully_shard(model)
    _train(rank, model)
    return [q.full_tensor().detach() for q in model.parameters()]


def test_fsdp2_fully_shard_trains_like_one_process() -> None:
    p = 2
    want = _reference(p)
    for params in run_dist(_fsdp, p, timeout=60):
        for a, b in zip(params, want):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_default_group_is_the_package_group() -> None:
    def kind(rank: int) -> tuple[str, int]:
        return type(dist.group.WORLD).__name__, dist.group.WORLD.transport.rank

    assert run_dist(kind, 2, timeout=10) == [
        (ThreadProcessGroup.__name__, 0),
        (ThreadProcessGroup.__name__, 1),
    ]


# -- the same inside a virtual run (mycollectives.virtual) --------------------------------------


def test_dist_and_ddp_inside_a_virtual_run() -> None:
    virtual = pytest.importorskip("mycollectives.virtual")

    def step(rank: int) -> tuple[list, float]:
        t = torch.tensor([rank + 1.0])
        dist.all_reduce(t)
        params, _ = _ddp(rank, True)
        return [t.item(), *params], virtual.clock()

    run = virtual.run(step, cluster="dgx_h100", nodes=1, setup=[thread_world])
    p = len(run.results)
    want = _reference(p)
    for values, clock in run.results:
        assert values[0] == p * (p + 1) / 2
        for a, b in zip(values[1:], want):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
        assert clock > 0


class _InFlight:
    """A handle whose collective completes only when someone waits for it (as on a virtual cluster)."""

    def __init__(self) -> None:
        self.future: torch.futures.Future = torch.futures.Future()
        self.waits = 0

    def is_completed(self) -> bool:
        return self.future.done()

    def wait(self, timeout=None) -> bool:
        self.waits += 1
        if not self.future.done():
            self.future.set_result([torch.ones(1)])
        return True

    def get_future(self) -> torch.futures.Future:
        return self.future


def test_work_in_flight_is_joined_by_future_wait_and_at_backward_end() -> None:
    from mycollectives.torchpg import TorchWork

    out = torch.zeros(2)
    handle = _InFlight()
    fut = TorchWork([handle], [out]).get_future()
    assert not fut.done()
    assert fut.wait()[0] is out and handle.waits == 1  # the wait reached the handle, in Python

    handle = _InFlight()
    x = torch.ones(3, requires_grad=True)

    def post_during_backward(grad: torch.Tensor) -> torch.Tensor:
        TorchWork([handle], [out]).join_at_backward_end()
        assert handle.waits == 0
        return grad

    x.register_hook(post_during_backward)
    (2 * x).sum().backward()
    assert handle.waits == 1 and handle.is_completed()  # autograd waited for it when backward ended


def test_fsdp2_inside_a_virtual_run() -> None:
    virtual = pytest.importorskip("mycollectives.virtual")
    run = virtual.run(_fsdp, cluster="dgx_h100", nodes=1, world_size=4, setup=[thread_world])
    want = _reference(4)
    for params in run.results:
        for a, b in zip(params, want):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert run.elapsed > 0


# -- the lab scripts, their ranks as threads -----------------------------------------------------

SCRIPTS = Path(__file__).resolve().parents[1] / "labs" / "scripts"


def _lab(script: str, mode: list[str], *args: str, tmp_path: Path) -> dict:
    out = tmp_path / "result.json"
    cmd = [sys.executable, str(SCRIPTS / script), *mode, *args, "--out", str(out)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(SCRIPTS.parents[1])}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    return json.loads(out.read_text())


@pytest.mark.multiprocess
@pytest.mark.timeout(300)
def test_lab_ddp_runs_as_thread_ranks(tmp_path: Path) -> None:
    res = _lab(
        "ddp.py", ["--threads", "2"], "--width", "64", "--depth", "2", "--steps", "1", tmp_path=tmp_path
    )
    assert (res["mode"], res["world_size"], res["backend"]) == ("threads", 2, "mycollectives")
    assert {"torch DDP", "torch DDP + mc hook"} <= set(
        res["times"]
    )  # the script checked every variant's gradients


@pytest.mark.multiprocess
@pytest.mark.timeout(300)
def test_lab_pipeline_runs_as_thread_ranks(tmp_path: Path) -> None:
    res = _lab(
        "pipeline.py", ["--threads", "2"], "--width", "32", "--micro-batches", "1", "2", tmp_path=tmp_path
    )
    assert res["p"] == 2 and [r["m"] for r in res["sweep"]] == [1, 1, 2, 2]


@pytest.mark.multiprocess
def test_lab_virtual_flag_is_checked(tmp_path: Path) -> None:
    cmd = [sys.executable, str(SCRIPTS / "moe.py"), "--virtual", "dgx_h100:two"]
    env = {**os.environ, "PYTHONPATH": str(SCRIPTS.parents[1])}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode != 0 and "NODE[:NODES]" in proc.stderr


@pytest.mark.multiprocess
@pytest.mark.timeout(600)
def test_lab_ddp_on_a_virtual_node(tmp_path: Path) -> None:
    pytest.importorskip("mycollectives.virtual")
    res = _lab(
        "ddp.py",
        ["--virtual", "dgx_h100"],
        "--width",
        "64",
        "--depth",
        "2",
        "--steps",
        "1",
        tmp_path=tmp_path,
    )
    assert (res["mode"], res["world_size"], res["local_size"]) == ("virtual", 8, 8)
    assert res["device"] == "virtual dgx_h100"
    assert 0 < res["times"]["torch DDP"] < 0.1  # virtual seconds of a modelled H100 step, not this CPU's
