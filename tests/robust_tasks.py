"""Tasks for tests/test_robust.py (issue 33: tags, dead peers in send/recv, the
shared-memory set-up of new groups), run on every rank of a gloo group (see distpool.py)."""

from __future__ import annotations

import os
import time

import torch
import torch.distributed as dist
from distpool import outcome as _outcome

import mycollectives as mc
from mycollectives.transport import COLLECTIVE_TAG
from mycollectives.transport.shm import ShmTransport
from mycollectives.transport.torch_dist import TorchDistTransport


def _transport(kind: str, timeout: float = 30.0):
    return ShmTransport(None, timeout=timeout) if kind == "shm" else TorchDistTransport(None, timeout=timeout)


def reserved_tag(rank: int, kind: str) -> dict:
    """A send with the package's own tag is refused; the collective after it is right."""
    t = _transport(kind)
    out = {}
    for tag in (COLLECTIVE_TAG, COLLECTIVE_TAG + 1, -1, 1.5):
        out[repr(tag)] = _outcome(lambda: mc.isend(torch.ones(2), 1 - rank, group=t, tag=tag))  # noqa: B023
    out["recv"] = _outcome(lambda: mc.irecv(torch.ones(2), 1 - rank, group=t, tag=COLLECTIVE_TAG))
    x = torch.ones(4)
    mc.all_reduce(x, group=t, timeout=20)
    out["sum"] = x.tolist()
    handle = mc.isend(
        torch.full((2,), 7.0), 1 - rank, group=t, tag=COLLECTIVE_TAG - 1
    )  # the largest user tag
    got = torch.zeros(2)
    mc.recv(got, 1 - rank, group=t, tag=COLLECTIVE_TAG - 1)
    handle.wait()
    out["largest user tag"] = got.tolist()
    if kind == "shm":
        t.close()
    return out


def p2p_dead_peer(rank: int, kind: str) -> list[str]:
    """Rank 1 exits; rank 0's send, recv, isend and irecv to it raise the package's errors."""
    t = _transport(kind, timeout=4.0)
    dist.barrier()
    if rank == 1:
        os._exit(0)
    time.sleep(1.0)
    out = []
    for call in (
        lambda: mc.send(torch.ones(1 << 12), 1, group=t),
        lambda: mc.recv(torch.ones(4), 1, group=t),
        lambda: mc.isend(torch.ones(4), 1, group=t).wait(),
        lambda: mc.irecv(torch.ones(4), 1, group=t).wait(),
    ):
        out.append(_outcome(call))
    return out


def new_groups_in_opposite_orders(rank: int, timeout: float) -> dict:
    """On shared memory, two new groups first used asynchronously in opposite orders."""
    p = dist.get_world_size()
    a = dist.new_group(list(range(p)))
    b = dist.new_group(list(range(p)))
    os.environ["MYCOLLECTIVES_TRANSPORT"] = "shm"
    try:
        order = [(a, 1.0), (b, 10.0)] if rank == 0 else [(b, 10.0), (a, 1.0)]
        xs, works, pending = {}, [], []
        if rank == 1:
            time.sleep(1.0)  # rank 1 comes late: rank 0's async calls must return without it
        for group, value in order:
            xs[value] = torch.full((1000,), value)
            works.append(mc.all_reduce(xs[value], group=group, async_op=True, timeout=timeout))
            pending.append(not works[-1].is_completed())
        for w in works:
            w.wait()
        return {"sums": {k: float(v[0]) for k, v in xs.items()}, "pending": pending}
    finally:
        os.environ.pop("MYCOLLECTIVES_TRANSPORT", None)


def env_timeout(rank: int, value: str) -> str:
    """A bad MYCOLLECTIVES_TIMEOUT: a clear error naming it, on the first call of a new group."""
    group = dist.new_group(list(range(dist.get_world_size())))
    os.environ["MYCOLLECTIVES_TIMEOUT"] = value
    try:
        return _outcome(lambda: mc.all_reduce(torch.ones(4), group=group))
    finally:
        os.environ.pop("MYCOLLECTIVES_TIMEOUT", None)


def dtensor_under_the_patch(rank: int) -> dict:
    """DTensor tensor parallelism (Colwise then Rowwise) under the patch: its
    functional collectives are not the package's, and the patch says so."""
    import warnings

    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    from mycollectives.patch import NotRouted

    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 8))
    x = torch.randn(4, 8)
    want = mlp(x)
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    tp = parallelize_module(mlp, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
    undo = mc.patch_torch_distributed()
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            got = tp(x)
            got = got.full_tensor() if hasattr(got, "full_tensor") else got
    finally:
        undo()
    return {
        "equal": bool(torch.allclose(got, want, atol=1e-6)),
        "not routed": [str(w.message) for w in seen if issubclass(w.category, NotRouted)],
    }
