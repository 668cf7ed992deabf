"""The virtual cluster against the round simulator: one model, two engines, one answer.

:func:`agreement` runs each collective alone on the virtual cluster (real
data, every rank a thread, flows in virtual time) and with
:func:`mycollectives.sim.simulate` on the same topology, and returns both
times. Where every rank runs each round in step, the two engines compute
the same thing; where the virtual ranks get out of step (a tree's pipelined
segments) the virtual run may finish a little earlier, since it starts a
round on a rank as soon as that rank's own messages are in, without waiting
for the whole round.

:func:`published` sets the virtual cluster beside the calculator on the
published rows of ``sim/published.json`` (the appendix "The simulator
against published measurements"): one data-free call per row, network only.
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
# Data-free (meta) tensors of each collective for nccl-tests' ``size`` bytes of float32 on ``p`` ranks, and
# the call: the buffers a rank of nccl-tests holds, so the messages are the same as with data.
_META = {
    "all_reduce": (lambda s, p: (_meta(s // 4),), lambda mc, kw, x: mc.all_reduce(x, **kw)),
    "all_gather": (
        lambda s, p: (_meta(s // 4), _meta(s // (4 * p))),
        lambda mc, kw, out, x: mc.all_gather_into_tensor(out, x, **kw),
    ),
    "reduce_scatter": (
        lambda s, p: (_meta(s // (4 * p)), _meta(s // 4)),
        lambda mc, kw, out, x: mc.reduce_scatter_tensor(out, x, **kw),
    ),
    "all_to_all": (
        lambda s, p: ([_meta(s // (4 * p)) for _ in range(p)], [_meta(s // (4 * p)) for _ in range(p)]),
        lambda mc, kw, out, x: mc.all_to_all(out, x, **kw),
    ),
}


def _meta(n: int) -> torch.Tensor:
    return torch.empty(n, device="meta")


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


# NCCL's algorithm -> what the virtual cluster runs when a published run forced it: Ring is the package's
# ring on NCCL's channels; any other runs only as NCCL's own pick ("auto"), there being no NCCL_ALGO.
_FORCED = {"Ring": "ring"}
_CLUSTER_KEYS = ("node", "nodes", "nics_per_node", "nic", "nvls", "sharp", "gpus_per_node")  # a row's cluster


def published(points, max_ranks: int = 32, timeout: float = 600.0) -> list[dict]:
    """The virtual cluster beside the calculator on published rows (``sim/published.json``).

    For every modelled point of ``points`` (:func:`mycollectives.sim.validate.chosen`'s):
    the published busbw, the calculator's (:func:`mycollectives.sim.validate.results`)
    and the virtual cluster's, one call on the row's cluster, size and GPUs,
    data-free (``virtual.run(..., data=False)``, meta tensors) and network only
    (no compute charged, as the calculator prices none). A row the calculator
    lets NCCL choose for runs ``algorithm="auto"`` (NCCL's pick inside a
    virtual run); a forced Ring runs the package's ring on NCCL's channels;
    another forced algorithm runs only where it is NCCL's own pick. Rows the
    virtual cluster does not run carry ``virtual_busbw = None`` and ``why``:
    a forced algorithm NCCL would not pick, or more than ``max_ranks`` ranks
    (it runs every message, so a 512-rank ring is minutes of wall time).
    """
    from ..sim.nccl import choose
    from ..sim.validate import results
    from ..topology import cluster

    got, rows, seen = results(), [], {}
    for pt in points:
        m = pt.model
        if m is None:
            raise ValueError(f"published: point {pt.id} has no model (set {pt.set!r}: {pt.why_outside})")
        topo = cluster(*(m[k] for k in _CLUSTER_KEYS[:2]), **{k: m[k] for k in _CLUSTER_KEYS[2:]})
        p = m["gpus"] or topo.num_gpus
        alg, why = _algorithm(pt.collective, m, topo, choose), None
        if alg is None:
            why = f"forced {m['algorithm']}, which NCCL would not pick here"
        elif p > max_ranks:
            why = f"{p} ranks (more than {max_ranks})"
        elif pt.collective not in _META:
            why = f"{pt.collective} has no data-free call here"
        virt = None
        if why is None:
            key = (*(m[k] for k in _CLUSTER_KEYS), p, pt.collective, alg, m["size"])
            if key not in seen:
                seen[key] = virtual_busbw(pt.collective, alg, int(m["size"]), topo, p, timeout=timeout)
            virt = seen[key]
        rows.append({"id": pt.id, "split": pt.split, "set": pt.set, "collective": pt.collective, "ranks": p,
                     "published_busbw": pt.busbw, "calculator_busbw": got[pt.id][0].busbw,
                     "virtual_busbw": virt, "ran": alg, "why": why})  # fmt: skip
    return rows


def _algorithm(collective: str, m: dict, topo, choose) -> str | None:
    """What the virtual cluster runs for a row: ``"auto"``, ``"ring"``, or None where it cannot run it."""
    forced = m["algorithm"]
    if forced is None or collective == "all_to_all":
        return "auto"
    if forced in _FORCED:
        return _FORCED[forced]
    return "auto" if choose(collective, m["size"], topo, m["gpus"])[0] == forced else None


def virtual_busbw(
    collective: str, algorithm: str, size: int, topo, p: int, *, compute=NETWORK_ONLY, timeout: float = 600.0
) -> float:
    """busbw (GB/s) of one data-free call of ``size`` bytes on the first ``p`` GPUs of ``topo``, in virtual
    time; ``compute`` as :func:`~mycollectives.virtual.run` takes it (default: network only)."""
    from ..collectives import busbw_factor

    r = run(_meta_call, topo, 1, (collective, size, p, algorithm), world_size=p, data=False,
            timeout=timeout, compute=compute)  # fmt: skip
    return busbw_factor(collective, p) * size / max(r.results) / 1e9


def _meta_call(rank: int, collective: str, size: int, p: int, algorithm: str) -> float:
    from .. import api as mc

    make, call = _META[collective]
    tensors = make(size, p)
    t0 = current().clock
    call(mc, {"algorithm": algorithm, "check": False}, *tensors)
    return current().clock - t0
