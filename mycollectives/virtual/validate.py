"""The virtual cluster against the round simulator: one model, two engines, one answer.

:func:`agreement` runs each collective alone on the virtual cluster (real
data, every rank a thread, flows in virtual time) and with
:func:`mycollectives.sim.simulate` on the same topology, and returns both
times. Where every rank runs each round in step, the two engines compute
the same thing; where the virtual ranks get out of step (a tree's pipelined
segments) the virtual run may finish a little earlier, since it starts a
round on a rank as soon as that rank's own messages are in, without waiting
for the whole round.
"""

from __future__ import annotations

import torch

from ..collectives import record
from ..sim import simulate
from .maestro import current
from .rates import NETWORK_ONLY
from .runner import run, topology_of

# Each collective's tensors for nccl-tests' size of ``n`` float32 elements per rank's block on ``p`` ranks,
# and the call.
_CALLS = {
    "all_reduce": (lambda n, p: (torch.ones(n),), lambda mc, kw, x: mc.all_reduce(x, **kw)),
    "broadcast": (lambda n, p: (torch.ones(n),), lambda mc, kw, x: mc.broadcast(x, src=0, **kw)),
    "all_gather": (
        lambda n, p: (torch.empty(n * p), torch.ones(n)),
        lambda mc, kw, out, x: mc.all_gather_into_tensor(out, x, **kw),
    ),
    "reduce_scatter": (
        lambda n, p: (torch.empty(n), torch.ones(n * p)),
        lambda mc, kw, out, x: mc.reduce_scatter_tensor(out, x, **kw),
    ),
}


def _one(rank: int, collective: str, count: int, p: int, algorithm: str, channels: int) -> float:
    from .. import api as mc

    make, call = _CALLS[collective]
    with torch.no_grad():
        tensors = make(count, p)
        t0 = current().clock
        call(mc, {"algorithm": algorithm, "channels": channels}, *tensors)
        return current().clock - t0


def agreement(
    collective: str = "all_reduce",
    algorithms=("ring", "double_binary_tree", "recursive_doubling", "hierarchical"),
    sizes=(1 << 16, 1 << 20, 1 << 24),
    nodes=(1, 2),
    cluster: str = "dgx_h100",
    protocol: str = "simple",
    timeout: float = 300.0,
    channels: int = 1,
) -> list[dict]:
    """One row per (nodes, algorithm, size): the virtual and simulated times (seconds) and their ratio.

    ``sizes`` are nccl-tests' ``size`` in bytes of float32; both engines run the
    schedule on ``channels`` channels. The virtual time is the slowest rank's
    clock across the call.
    """
    if collective not in _CALLS:
        raise ValueError(f"agreement: collective must be one of {tuple(_CALLS)}, got {collective!r}")
    rows = []
    for n in nodes:
        for alg in algorithms:
            for size in sizes:
                topo = topology_of(cluster, n)
                p = topo.num_gpus
                spec = record(collective).spec(p, size, 4)
                args = (collective, spec.count, p, alg, channels)
                r = run(_one, topo, 1, args, protocol=protocol, timeout=timeout, compute=NETWORK_ONLY)
                virt = max(r.results)
                local = topo.gpus_per_node
                sim = simulate(
                    collective, alg, size, topo, protocol=protocol, local_size=local, channels=channels
                ).time_s
                rows.append(
                    {
                        "nodes": n,
                        "ranks": p,
                        "algorithm": alg,
                        "bytes": size,
                        "virtual_s": virt,
                        "simulated_s": sim,
                        "ratio": virt / sim,
                    }
                )
    return rows


_PACKAGE = {"Ring": "ring", "Tree": "double_binary_tree"}  # NCCL's algorithm -> the package's schedule


def engines(max_bytes: int = 64 << 20, which: str = "asserted", timeout: float = 600.0) -> list[dict]:
    """The two engines side by side on the single-node rows of the published dataset (``sim/published.json``).

    For each row of set ``which`` on one node whose collective :func:`agreement`
    can run: NCCL's algorithm for it (as the validation page's simulator picks
    it), the package's schedule that runs (``ran``: ``ring`` for Ring, and for
    NVLS, which has no executable schedule here, the nearest), on the
    channels NCCL would use inside a virtual run, at the row's size capped at
    ``max_bytes`` (the virtual run moves real data). Each row gives both
    engines' times (seconds) and busbw (GB/s) and ``ratio`` = virtual /
    simulated; rows of one shape are run once.
    """
    from ..collectives import busbw_factor
    from ..sim.nccl import choose
    from ..sim.validate import points
    from ..topology import cluster
    from .channels import for_call

    rows, seen = [], {}
    for pt in points():
        m = pt.model
        if pt.set != which or pt.nodes != 1 or m is None or pt.collective not in _CALLS:
            continue
        topo = cluster(m["node"], 1, nvls=m["nvls"], gpus_per_node=m["gpus_per_node"])
        p = m["gpus"] or topo.num_gpus
        forced = [m["algorithm"]] if m["algorithm"] else None
        nccl = choose(pt.collective, m["size"], topo, m["gpus"], forced)[0]
        ran = _PACKAGE.get(nccl, "ring")
        size = min(int(m["size"]), max_bytes) // (4 * p) * (4 * p)
        k = for_call(size, topo, p, 1)
        key = (m["node"], m["gpus_per_node"], p, pt.collective, ran, size, k)
        if key not in seen:
            seen[key] = _both(pt.collective, ran, size, topo, p, k, timeout)
        virt, sim = seen[key]
        factor = busbw_factor(pt.collective, p) * size / 1e9
        rows.append({"id": pt.id, "collective": pt.collective, "cluster": topo.name, "ranks": p,
                     "nccl": nccl, "ran": ran, "channels": k, "bytes": size, "virtual_s": virt,
                     "simulated_s": sim, "ratio": virt / sim, "virtual_busbw": factor / virt,
                     "simulated_busbw": factor / sim, "published_busbw": pt.busbw})  # fmt: skip
    return rows


def _both(
    collective: str, algorithm: str, size: int, topo, p: int, k: int, timeout: float
) -> tuple[float, float]:
    """The virtual and simulated time of one call on the first ``p`` GPUs of ``topo``, on ``k`` channels."""
    spec = record(collective).spec(p, size, 4)
    r = run(_one, topo, 1, (collective, spec.count, p, algorithm, k), world_size=p, timeout=timeout)
    sim = simulate(collective, algorithm, size, topo, world_size=p, local_size=p, channels=k).time_s
    return max(r.results), sim
