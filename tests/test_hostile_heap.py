"""Issue 42, item 5 on the virtual cluster's heap: ranks that pass tensors at different offsets of
their blocks (a legal layout, which torch runs) get torch's result, with the argument check and
without it (``check=False``); every time here is virtual, on dgx_h100."""

from __future__ import annotations

import pytest
import torch

import mycollectives as mc
from mycollectives import virtual

T = 120  # wall-clock guard of every run, seconds
N = 8


def _offsets(rank: int, check: bool, algorithm: str, p: int) -> dict:
    x = mc.symmetric.empty(p * N)
    mc.symmetric.rendezvous(x)
    mine = x[rank * N : (rank + 1) * N]  # rank r's tensor at byte offset 32 r of its block
    out = {}
    x.fill_(-99.0)  # what a read at the wrong offset would find
    mine.fill_(rank + 1.0)
    mc.all_reduce(mine, algorithm=algorithm, check=check)
    out["all_reduce"] = mine.tolist()
    x.fill_(-99.0)
    mine.copy_(torch.arange(N) + 10.0 * rank)
    mc.broadcast(mine, p - 1, check=check)
    out["broadcast"] = mine.tolist()
    x.fill_(-99.0)
    mc.all_gather_into_tensor(mine, torch.full((N // p,), rank + 1.0), check=check)
    out["all_gather"] = mine.tolist()
    return out


@pytest.mark.timeout(300)
@pytest.mark.parametrize("check", [False, True])
@pytest.mark.parametrize(("p", "algorithm"), [(2, "ring"), (4, "one_shot"), (4, "direct")])
def test_tensors_at_different_offsets_give_torchs_result(check, p, algorithm):
    run = virtual.run(_offsets, "dgx_h100", world_size=p, args=(check, algorithm, p), timeout=T)
    for out in run.results:
        assert out["all_reduce"] == [p * (p + 1) / 2] * N, out
        assert out["broadcast"] == [float(i) + 10.0 * (p - 1) for i in range(N)], out
        assert out["all_gather"] == [float(r + 1) for r in range(p) for _ in range(N // p)], out
