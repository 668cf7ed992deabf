"""The collective matmul (chapter 5): an all-gather hidden behind the matmul it feeds.

Sequence-parallel tensor parallelism multiplies ``all_gather(x) @ w``: every
rank needs all ``p`` row blocks of ``x`` before its matmul can start. The
collective matmul (Wang et al. 2023; PyTorch's *async tensor parallelism*)
cuts the gather into its ``p - 1`` ring steps and the matmul into ``p``
blocks: at each step a rank posts the send of the block it holds to the next
rank and the receive of the next block, multiplies the block it holds while
they are in flight, then waits. Only the last block's matmul has nothing to
hide, and a step costs ``max(matmul, transfer)`` instead of their sum.

:func:`simulate` prices both on a topology: the transfers from the
simulator's rounds of a ring all-gather, the matmuls at a GPU's peak rate
(an upper bound on its speed, so a *lower* bound on what overlap hides).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import torch

from .. import api
from ..memory.vendor import H100, GPUSpec
from ..sim import simulate as sim_collective
from ..topology import Topology, dgx_h100


def _post_shift(tensor: torch.Tensor, group):
    r, p = api.get_rank(group), api.get_world_size(group)
    buf = torch.empty_like(tensor)
    recv = api.irecv(buf, group=group, group_src=(r - 1) % p)
    send = api.isend(tensor, group=group, group_dst=(r + 1) % p)
    return buf, (send, recv)


def all_gather_matmul(x: torch.Tensor, w: torch.Tensor, group=None, overlap: bool = True) -> torch.Tensor:
    """``all_gather(x) @ w`` by ``p`` ring steps; ``x``: this rank's ``[n, k]`` rows, ``w``: ``[k, m]``.

    ``overlap=False`` waits for each step's transfer before the matmul (the
    same steps, one after the other), to measure what the overlap buys.
    """
    r, p = api.get_rank(group), api.get_world_size(group)
    n = x.shape[0]
    out = x.new_empty(p * n, w.shape[1])
    held = x.contiguous()
    for step in range(p):
        src = (r - step) % p  # the rank whose rows we hold
        if step < p - 1:
            buf, works = _post_shift(held, group)
            if not overlap:
                for wk in works:
                    wk.wait()
        out[src * n : (src + 1) * n] = held @ w  # while the next block is in flight
        if step < p - 1:
            for wk in works:
                wk.wait()
            held = buf
    return out


def gather_then_matmul(x: torch.Tensor, w: torch.Tensor, group=None) -> torch.Tensor:
    """The unoverlapped reference: one ring all-gather, then one matmul.

    The gather skips the package's argument check (``check=False``), as the
    send/recv steps of :func:`all_gather_matmul` do: the two then move the
    same messages, and only the overlap differs.
    """
    p = api.get_world_size(group)
    full = x.new_empty(p * x.shape[0], *x.shape[1:])
    api.all_gather_into_tensor(full, x.contiguous(), group=group, algorithm="ring", check=False)
    return full @ w


VARIANTS = {
    "all-gather, then matmul": lambda x, w, g: gather_then_matmul(x, w, g),
    "decomposed, not overlapped": lambda x, w, g: all_gather_matmul(x, w, g, overlap=False),
    "collective matmul": lambda x, w, g: all_gather_matmul(x, w, g, overlap=True),
}


def time_variants(rank: int, rows: int, k: int, m: int, reps: int = 7, seed: int = 0) -> dict:
    """Seconds per call of each variant on this rank, interleaved rep by rep (ABCABC...),
    after checking that all agree; plus the matmul alone and the all-gather alone.

    Run it on every rank of a group (``mc.run_gloo(time_variants, p, ...)``).
    """
    g = torch.Generator().manual_seed(seed + rank)
    x = torch.randn(rows, k, generator=g)
    w = torch.randn(k, m, generator=torch.Generator().manual_seed(seed))
    want = gather_then_matmul(x, w)
    for name, fn in VARIANTS.items():
        torch.testing.assert_close(
            fn(x, w, None), want, rtol=1e-4, atol=1e-4, msg=lambda s, n=name: f"{n}: {s}"
        )
    p = api.get_world_size()
    parts = {
        **VARIANTS,
        "matmul alone": lambda x, w, g: torch.cat([x] * p) @ w,
        "all-gather alone": lambda x, w, g: gather_then_matmul(x, w[:, :0], g),
    }
    times: dict[str, list[float]] = {name: [] for name in parts}
    for rep in range(reps):
        names = list(parts)
        names = names[rep % len(names) :] + names[: rep % len(names)]  # rotate the order
        for name in names:
            api.barrier()
            t0 = time.perf_counter()
            parts[name](x, w, None)
            times[name].append(time.perf_counter() - t0)
    return times


def summarize(per_rank: list[dict]) -> dict[str, float]:
    """Median over repetitions of the slowest rank's time, per variant."""
    names = per_rank[0]
    out = {}
    for name in names:
        slowest = [max(r[name][i] for r in per_rank) for i in range(len(per_rank[0][name]))]
        out[name] = statistics.median(slowest)
    return out


@dataclass(frozen=True)
class OverlapEstimate:
    """Seconds of an all-gather matmul on a topology: each part, and both ways of running it."""

    transfer_steps: tuple[float, ...]  # each ring step of the all-gather
    matmul_block: float
    all_gather: float
    sequential: float  # the all-gather, then the whole matmul
    overlapped: float  # the collective matmul

    @property
    def hidden(self) -> float:
        """The fraction of the all-gather's time that the overlap hides."""
        return (self.sequential - self.overlapped) / self.all_gather


def simulate(
    rows: int,
    k: int,
    m: int,
    p: int = 8,
    topology: Topology | None = None,
    gpu: GPUSpec = H100,
    dtype: str = "bf16",
    itemsize: int = 2,
    protocol: str = "simple",
) -> OverlapEstimate:
    """The collective matmul of ``[rows, k]`` per rank times ``[k, m]`` on ``p`` GPUs of ``topology``.

    Transfers: the rounds of the simulator's ring all-gather of ``p`` blocks
    of ``rows * k * itemsize`` bytes. Matmuls: ``2 rows k m`` FLOPs per block
    at ``gpu``'s dense peak for ``dtype``.
    """
    topo = topology or dgx_h100()
    block = rows * k * itemsize
    ag = sim_collective(
        "all_gather", "ring", p * block, topo, world_size=p, itemsize=itemsize, protocol=protocol
    )
    steps = tuple(float(t) for t in ag.round_time)
    mm = 2 * rows * k * m / gpu.peak_flops[dtype]
    launch = ag.time_s - sum(steps)  # the protocol's base latency, paid once either way
    overlapped = launch + sum(max(mm, t) for t in steps) + mm
    return OverlapEstimate(steps, mm, ag.time_s, ag.time_s + p * mm, overlapped)
