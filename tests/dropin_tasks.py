"""Tasks for tests/test_dropin.py, run on every rank of a gloo group (see distpool.py).

Each task takes the transport kind ("group": the process group's own send
and receive; "shm": shared memory) and returns what it saw, for the test to
judge; none of them asserts, so that every rank reports.
"""

from __future__ import annotations

import os
import time
import warnings

import torch
import torch.distributed as dist

import mycollectives as mc
from mycollectives.transport.shm import ShmTransport
from mycollectives.transport.torch_dist import TorchDistTransport


def transport(kind: str, timeout: float = 30.0):
    """A fresh transport of ``kind`` over the default group."""
    return ShmTransport(None, timeout=timeout) if kind == "shm" else TorchDistTransport(None, timeout=timeout)


def p2p_crosses_collective(rank: int, kind: str, check: bool) -> dict:
    """Rank 1 posts a send to rank 0, then both all-reduce, then rank 0 receives."""
    t = transport(kind)
    msg = torch.arange(8.0) + 100
    handle = mc.isend(msg, 0, group=t) if rank == 1 else None
    x = torch.full((1000,), float(rank + 1))
    mc.all_reduce(x, group=t, algorithm="ring", check=check)
    got = torch.zeros(8)
    if rank == 0:
        mc.recv(got, 1, group=t)
    if handle is not None:
        handle.wait()
    p = dist.get_world_size()
    out = {"all_reduce": bool(torch.all(x == p * (p + 1) / 2)), "recv": rank != 0 or torch.equal(got, msg)}
    t.close() if kind == "shm" else None
    return out


def async_handles(rank: int, kind: str) -> dict:
    """Five async all-reduces, then a blocking one, then the handles."""
    t = transport(kind)
    xs = [torch.full((1 << 16,), float(rank + k)) for k in range(5)]
    works = [mc.all_reduce(x, group=t, async_op=True) for x in xs]
    pending_at_once = [not w.is_completed() for w in works]
    y = torch.full((10,), 1.0)
    mc.all_reduce(y, group=t)  # waits its turn behind the five
    p = dist.get_world_size()
    fut = works[0].get_future()
    value = fut.wait()
    out = {
        "any_pending_at_once": any(pending_at_once),
        "results": [bool(torch.all(x == sum(r + k for r in range(p)))) for k, x in enumerate(xs)],
        "blocking": bool(torch.all(y == p)),
        "future_value_is_the_tensor": value[0] is xs[0],
        "completed": all(w.is_completed() and w.is_success() and w.exception() is None for w in works),
        "wait_returns": all(w.wait() is True for w in works),
    }
    t.close() if kind == "shm" else None
    return out


def async_error_in_work(rank: int, kind: str) -> str:
    """An async collective whose peer never joins: the error comes out of wait()."""
    t = transport(kind, timeout=3.0)
    if rank == 1:
        time.sleep(5)
        return "skipped"
    w = mc.all_reduce(torch.ones(100), group=t, async_op=True, check=False, timeout=2.0)
    try:
        w.wait()
    except mc.CollectiveError as e:
        return f"{type(e).__name__}: {e} | exception() set: {w.exception() is not None}"
    return "no error"


def dead_before_the_call(rank: int, kind: str, victim: int) -> str:
    """``victim`` exits before the collective; the others must get PeerError or CollectiveTimeout."""
    t = transport(kind, timeout=6.0)
    dist.barrier()  # every transport built
    if rank == victim:
        os._exit(0)
    time.sleep(0.5)
    try:
        mc.all_reduce(torch.ones(1 << 12), group=t, algorithm="ring", check=False, timeout=6.0)
    except mc.CollectiveError as e:
        return f"{type(e).__name__}: {e}"
    except Exception as e:  # noqa: BLE001 - what must not happen: a raw error from below
        return f"RAW {type(e).__name__}: {e}"
    return "completed"


def killed_mid_call_shm(rank: int, victim: int) -> dict:
    """On shared memory, ``victim`` dies in the middle of a stream of all-reduces;
    returns what a survivor raised, what is left in /dev/shm of its own files
    after it closed, and the transport's key (the test looks for the rest)."""
    import threading

    t = transport("shm", timeout=10.0)
    key = t.key
    if rank == victim:
        threading.Timer(0.3, lambda: os._exit(1)).start()
    x = torch.ones(1 << 20)
    message = "completed"
    try:
        for _ in range(500):
            mc.all_reduce(x, group=t, algorithm="ring", check=False, timeout=10.0)
    except mc.CollectiveError as e:
        message = f"{type(e).__name__}: {e}"
    except Exception as e:  # noqa: BLE001
        message = f"RAW {type(e).__name__}: {e}"
    t.close(grace=0.0)
    # this rank's own files are gone once it has closed; a peer still inside
    # the call (waiting out its timeout) keeps its own until it closes
    mine = [f for f in os.listdir("/dev/shm") if f.startswith(f"mycollectives-{key:x}-{rank}-")]
    return {"message": message, "left": mine, "key": key}


def shm_setup_with_a_late_rank(rank: int, late: int, timeout: float) -> str:
    """The first call on a shared-memory group while ``late`` never comes: an
    error within the call's timeout, naming the late rank."""
    group = dist.new_group(list(range(dist.get_world_size())))
    os.environ["MYCOLLECTIVES_TRANSPORT"] = "shm"
    try:
        if rank == late:
            time.sleep(timeout + 4)
            return "late"
        start = time.monotonic()
        try:
            mc.all_reduce(torch.ones(10), group=group, timeout=timeout)
        except mc.CollectiveError as e:
            return f"{type(e).__name__} after {time.monotonic() - start:.1f} s: {e}"
        return "completed"
    finally:
        os.environ.pop("MYCOLLECTIVES_TRANSPORT", None)


def shm_setup_under_a_patched_torch(rank: int) -> str:
    """torch.distributed's collectives replaced by the package's: building the
    shared-memory transport must not call them (it would recurse)."""
    undo = mc.patch_torch_distributed()
    group = dist.new_group(list(range(dist.get_world_size())))
    os.environ["MYCOLLECTIVES_TRANSPORT"] = "shm"
    try:
        x = torch.full((64,), float(rank))
        dist.all_reduce(x, group=group)  # the package's, on a fresh shared-memory transport
        dist.barrier(group=group)
        return str(x[0].item())
    finally:
        os.environ.pop("MYCOLLECTIVES_TRANSPORT", None)
        undo()


def not_in_group(rank: int) -> dict:
    """A group of ranks 0 and 1 of three: rank 2 calling on it does nothing, as in torch."""
    pair = dist.new_group([0, 1])
    x = torch.full((4,), float(rank))
    keep = x.clone()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ret = mc.all_reduce(x, group=pair) if rank < 2 else mc.all_reduce(x, group=pair, async_op=True)
    return {"returned": repr(ret), "value": x.tolist(), "untouched": torch.equal(x, keep),
            "warned": any("not in the group" in str(w.message) for w in caught)}  # fmt: skip


def alias_all_to_all(rank: int, kind: str) -> bool:
    """``all_to_all_single(t, t)``: the same as with separate tensors."""
    t = transport(kind)
    p = dist.get_world_size()
    x = torch.arange(4.0 * p) + 100 * rank
    want = torch.empty_like(x)
    mc.all_to_all_single(want, x.clone(), group=t)
    mc.all_to_all_single(x, x, group=t)
    t.close() if kind == "shm" else None
    return bool(torch.equal(x, want))


def meta_refused(rank: int, kind: str) -> str:
    t = transport(kind)
    try:
        mc.all_reduce(torch.empty(8, device="meta"), group=t, timeout=10)
    except (ValueError, TypeError) as e:
        return f"{type(e).__name__}: {e}"
    finally:
        t.close() if kind == "shm" else None
    return "no error"


class _AllReduce(torch.autograd.Function):
    """Tensor parallelism's row-parallel output: all-reduce forward, identity backward."""

    @staticmethod
    def forward(ctx, x):
        y = x.clone()
        dist.all_reduce(y)
        return y

    @staticmethod
    def backward(ctx, g):
        return g


class _Copy(torch.autograd.Function):
    """Column-parallel input: identity forward, all-reduce of the gradient backward."""

    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        g = g.clone()
        dist.all_reduce(g)
        return g


def _trainers(rank: int, steps: int = 3) -> dict:
    """DDP with a comm hook, a Megatron-style tensor-parallel MLP, FSDP2: what
    each computes after a few SGD steps, through whatever ``torch.distributed``
    is at the time (its own, or patched)."""
    import torch.nn as nn
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.nn.parallel import DistributedDataParallel as DDP

    p, out = dist.get_world_size(), {}
    group = dist.new_group(list(range(p)))  # a fresh group: the transport kind is read on first use

    def hook(state, bucket):
        t = bucket.buffer()
        return (
            dist.all_reduce(t.div_(p), group=group, async_op=True).get_future().then(lambda f: f.value()[0])
        )

    torch.manual_seed(0)
    ddp = DDP(nn.Sequential(nn.Linear(12, 24), nn.Tanh(), nn.Linear(24, 4)), process_group=group)
    ddp.register_comm_hook(None, hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    torch.manual_seed(10 + rank)
    x = torch.randn(6, 12)
    for _ in range(steps):
        ddp(x).square().mean().backward()
        opt.step()
        opt.zero_grad()
    out["ddp"] = torch.cat([q.detach().reshape(-1) for q in ddp.parameters()])

    torch.manual_seed(1)
    w1, w2 = torch.randn(12, 8 * p), torch.randn(8 * p, 5)
    a = w1[:, rank * 8 : (rank + 1) * 8].clone().requires_grad_()  # column parallel
    b = w2[rank * 8 : (rank + 1) * 8].clone().requires_grad_()  # row parallel
    xin = torch.randn(3, 12, generator=torch.Generator().manual_seed(2)).requires_grad_()
    y = _AllReduce.apply(torch.relu(_Copy.apply(xin) @ a) @ b)
    y.square().sum().backward()
    out["tp"] = torch.cat(
        [y.detach().reshape(-1), a.grad.reshape(-1), b.grad.reshape(-1), xin.grad.reshape(-1)]
    )

    mesh = init_device_mesh("cpu", (p,))
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8))
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(4, 16, generator=torch.Generator().manual_seed(3 + rank))
    for _ in range(steps):
        model(x).square().mean().backward()
        opt.step()
        opt.zero_grad()
    out["fsdp2"] = torch.cat([q.full_tensor().detach().reshape(-1) for q in model.parameters()])
    return out


def patched_trainers(rank: int, kind: str) -> dict:
    """The three trainers natively, then with the package patched in (on ``kind``):
    the largest difference per trainer."""
    native = _trainers(rank)
    os.environ["MYCOLLECTIVES_TRANSPORT"] = kind
    undo = mc.patch_torch_distributed()
    try:
        ours = _trainers(rank)
    finally:
        undo()
        os.environ.pop("MYCOLLECTIVES_TRANSPORT", None)
    return {k: float((native[k] - ours[k]).abs().max()) for k in native}
