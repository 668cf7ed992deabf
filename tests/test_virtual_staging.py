"""The virtual cluster's message path without copies: results stay torch's.

On the virtual cluster a message of a strand's channels (equal, evenly
spaced pieces) travels as one strided view of the sender's buffer, a copy of
such pieces is received straight into place, and the views of a rank's
staging are kept from call to call (dropped when the staging grows). These
runs change the message size between calls, so the staging grows and shrinks
under kept views, and check every rank's result against the sum torch computes.
"""

from __future__ import annotations

import pytest
import torch

import mycollectives as mc
from mycollectives import virtual

T = 300
SIZES = [1 << 18, 1 << 20, 1 << 16, 1 << 18, 3 * (1 << 16) + 5]  # float32 elements: 1 MiB, 4 MiB, ...


def _data(rank: int, n: int, call: int) -> torch.Tensor:
    """Small integers, so that every order of the additions gives the same floats."""
    g = torch.Generator().manual_seed(1000 * call + rank)
    return torch.randint(-50, 50, (n,), generator=g).float()


def _sum(p: int, n: int, call: int) -> torch.Tensor:
    return torch.stack([_data(r, n, call) for r in range(p)]).sum(0)


def _all_reduce_sizes(rank: int) -> list[torch.Tensor]:
    out = []
    for call, n in enumerate(SIZES):
        x = _data(rank, n, call)
        mc.all_reduce(x)  # what NCCL would run: a tree on 16 channels between 2 nodes
        out.append(x)
    return out


@pytest.mark.timeout(T)
def test_all_reduce_of_changing_sizes_equals_torchs_sum_on_every_rank():
    run = virtual.run(_all_reduce_sizes, "dgx_h100", 2)
    p = len(run.results)
    for call, n in enumerate(SIZES):
        want = _sum(p, n, call)
        for rank, got in enumerate(run.results):
            assert torch.equal(got[call], want), f"call {call} ({n} elements), rank {rank}"


def _collectives(rank: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    p, n = mc.get_world_size(), 1 << 16
    x = _data(rank, p * n, 0)
    part = torch.empty(n)
    mc.reduce_scatter_tensor(part, x, channels=4)
    whole = torch.empty(p * n)
    mc.all_gather_into_tensor(whole, part, channels=4)
    y = _data(rank, p * n, 1)
    mc.broadcast(y, src=3, channels=4)
    return part, whole, y


@pytest.mark.timeout(T)
def test_reduce_scatter_all_gather_and_broadcast_on_channels_equal_torchs():
    run = virtual.run(_collectives, "dgx_h100", 2)
    p, n = len(run.results), 1 << 16
    total = _sum(p, p * n, 0)
    for rank, (part, whole, y) in enumerate(run.results):
        assert torch.equal(part, total[rank * n : (rank + 1) * n]), f"reduce_scatter, rank {rank}"
        assert torch.equal(whole, total), f"all_gather, rank {rank}"
        assert torch.equal(y, _data(3, p * n, 1)), f"broadcast, rank {rank}"
