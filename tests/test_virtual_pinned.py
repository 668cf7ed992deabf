"""Virtual times pinned bit for bit: making the virtual cluster faster must not move any of them.

Each case runs on the virtual cluster and its per-rank virtual clocks are
compared, as exact floats (``float.hex``), with the values the package gave
before its speed work (issue 37): rings and trees, one node and two with
channels, NCCL's own choice, AVG (a charged division), send/recv with
compute between and a slow rank, and a DDP step through torch.distributed.
The data-free run of a case must give the same clocks as the run with data.
"""

from __future__ import annotations

import hashlib

import pytest
import torch
from torch import nn

import mycollectives as mc
from mycollectives import datafree, virtual

T = 300
MiB = 1 << 18  # float32 elements in 1 MiB


def _tensor(n: int, rank: int) -> torch.Tensor:
    if datafree.active():
        return torch.empty(n, device="meta")
    return torch.full((n,), float(rank + 1))


def _ring(rank: int) -> list[float]:
    x = _tensor(MiB, rank)
    mc.all_reduce(x, algorithm="ring", channels=1)
    t = [virtual.clock()]
    mc.all_reduce(x, op=mc.ReduceOp.AVG, algorithm="ring", channels=4, check=False)
    return [*t, virtual.clock()]


def _auto(rank: int) -> list[float]:
    x, out = _tensor(MiB, rank), _tensor(MiB // 16, rank)
    clocks = []
    for _ in range(2):
        mc.all_reduce(x)  # what NCCL would run: a tree of 16 channels on 2 nodes
        clocks.append(virtual.clock())
    mc.reduce_scatter_tensor(out, x, algorithm="ring", channels=2)
    mc.all_gather_into_tensor(x, out)
    return [*clocks, virtual.clock()]


def _p2p(rank: int) -> list[float]:
    a = torch.ones(128, 128) if not datafree.active() else torch.empty(128, 128, device="meta")
    x, y = _tensor(MiB // 4, rank), _tensor(MiB // 4, rank)
    p = mc.get_world_size()
    clocks = []
    for _ in range(3):
        a = a @ a  # compute, charged to the rank's clock (rank 3 is slow)
        send = mc.isend(x, (rank + 1) % p)
        mc.recv(y, (rank - 1) % p)
        send.wait()
        clocks.append(virtual.clock())
    return clocks


def _ddp(rank: int) -> list[float]:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    torch.manual_seed(0)
    model = DistributedDataParallel(nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 256)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    clocks = []
    for step in range(2):
        torch.manual_seed(rank * 10 + step)
        loss = model(torch.randn(64, 256)).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        clocks.append(virtual.clock())
    dist.barrier()
    return [*clocks, virtual.clock()]


# name: (function, run's keyword arguments, whether it also runs data-free)
CASES = {
    "ring 1 node, then 4 channels with AVG": (_ring, {"nodes": 1}, True),
    "NCCL's choice on 2 nodes, reduce-scatter, all-gather": (_auto, {"nodes": 2}, True),
    "send/recv with compute, a slow rank": (_p2p, {"nodes": 1, "slow": {3: 1.5}}, False),
    "DDP step through torch.distributed": (_ddp, {"nodes": 1, "world_size": 4, "dist": True}, False),
}

# sha256 of the clocks' float.hex, and the run's elapsed virtual time, before the speed work
PINNED = {
    "ring 1 node, then 4 channels with AVG": ("a5aae638a38a6028", "0x1.054da442549c5p-13"),
    "NCCL's choice on 2 nodes, reduce-scatter, all-gather": ("fb4b10d558b98f1a", "0x1.a3e95550d38a1p-12"),
    "send/recv with compute, a slow rank": ("7f579e46822594cd", "0x1.863ee29f67d03p-15"),
    "DDP step through torch.distributed": ("af80026bf04b3efb", "0x1.056db81b28ef4p-12"),
}


def clocks_of(name: str, data: bool = True) -> tuple[str, str]:
    fn, kw, _ = CASES[name]
    run = virtual.run(fn, "dgx_h100", timeout=T, data=data, **kw)
    text = ";".join(",".join(c.hex() for c in clocks) for clocks in run.results)
    return hashlib.sha256(text.encode()).hexdigest()[:16], run.elapsed.hex()


@pytest.mark.timeout(T)
@pytest.mark.parametrize("name", list(CASES))
def test_virtual_times_are_unchanged(name: str) -> None:
    assert clocks_of(name) == PINNED[name]


@pytest.mark.timeout(T)
@pytest.mark.parametrize("name", [n for n, case in CASES.items() if case[2]])
def test_data_free_runs_give_the_same_times(name: str) -> None:
    assert clocks_of(name, data=False) == PINNED[name]


if __name__ == "__main__":  # print the values to pin
    for case in CASES:
        print(repr(case), clocks_of(case), clocks_of(case, False) if CASES[case][2] else "")
