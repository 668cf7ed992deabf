"""``virtual.run``: a function on every GPU of a modelled cluster, in virtual time."""

from __future__ import annotations

import contextlib
import importlib
import math
import numbers
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from ..memory.roofline import Roofline
from ..sim.engine import LinkModel
from ..topology import PRESETS, Topology, cluster
from ..topology.nodes import NODES
from ..transport import bind
from . import maestro as _m
from .compute import Charge, roofline_of
from .streams import calls_of
from .trace import Metered
from .transport import Cluster, VirtualTransport

WALL_ENV = "MYCOLLECTIVES_VIRTUAL_TIMEOUT"  # wall-clock seconds a run may take (default 900)


@dataclass
class Run:
    """What a virtual run gives back."""

    results: list  # each rank's return value, rank order
    elapsed: float  # virtual seconds until the last rank (and its streams) finished
    clocks: list[float]  # each rank's virtual time when it returned
    topology: Topology
    roofline: Roofline
    spans: list = field(repr=False, default_factory=list)  # [rank, "compute"|"comm"|"stream", start, end]
    flops: list[float] = field(repr=False, default_factory=list)  # counted per rank
    stats: dict = field(
        default_factory=dict
    )  # flows, bytes, switches, wall seconds, bytes sent by link class
    calls: list = field(repr=False, default_factory=list)  # [rank, lane, start, end, flight entry] per call

    def table(self) -> str:
        """Per rank: virtual time, compute, exposed communication, bytes by link class (``trace.py``)."""
        from .trace import table

        return table(self)

    def trace(self, path) -> os.PathLike:
        """Write the run as Chrome trace / Perfetto JSON to ``path`` (``trace.py``); returns the path."""
        from .trace import write

        return write(self, path)


def topology_of(cluster_: str | Topology, nodes: int = 1, degrade: dict | None = None, **kw) -> Topology:
    """The cluster of a run: a :class:`Topology`, or a node kind / preset name with ``nodes`` and
    :func:`~mycollectives.topology.cluster`'s keywords; then ``degrade`` slows links (see :func:`run`)."""
    if not isinstance(nodes, numbers.Integral) or isinstance(nodes, bool) or nodes < 1:
        raise ValueError(f"virtual.run: argument 'nodes' must be a positive int, got {nodes!r}")
    if isinstance(cluster_, Topology):
        if nodes != 1 or kw:
            raise ValueError(
                "virtual.run: give nodes= and cluster keywords with a node name, not with a Topology"
            )
        topo = cluster_
    elif isinstance(cluster_, str) and cluster_ in NODES:
        topo = cluster(cluster_, nodes=nodes, **kw)
    elif isinstance(cluster_, str) and cluster_ in PRESETS:
        if nodes != 1 or kw:
            raise ValueError(
                f"virtual.run: preset {cluster_!r} is one node; for nodes= use one of {tuple(NODES)}"
            )
        topo = PRESETS[cluster_]()
    else:
        raise ValueError(
            f"virtual.run: argument 'cluster' must be a Topology or one of {tuple(NODES) + tuple(PRESETS)}, "
            f"got {cluster_!r}"
        )
    return degraded(topo, degrade) if degrade else topo


def degraded(topo: Topology, degrade: dict) -> Topology:
    """``topo`` with links slowed: ``{link: factor}`` (an index into ``topo.link_src``) or
    ``{(u, v): factor}``: the cable between vertices ``u`` and ``v`` (by index or name), both ways;
    for two GPUs with no cable between them, every link of the path between them, both ways."""
    bw = topo.link_bw.copy()
    for key, factor in degrade.items():
        if not isinstance(factor, numbers.Real) or not factor >= 1 or not math.isfinite(factor):
            raise ValueError(
                f"virtual.run: degrade factor for {key!r} must be a finite number >= 1, got {factor!r}"
            )
        if isinstance(key, numbers.Integral) and 0 <= key < topo.num_links:
            hit = np.array([int(key)])
        elif isinstance(key, tuple) and len(key) == 2:
            u, v = (topo.names.index(x) if isinstance(x, str) and x in topo.names else x for x in key)
            hit = np.flatnonzero(
                ((topo.link_src == u) & (topo.link_dst == v)) | ((topo.link_src == v) & (topo.link_dst == u))
            )
            gpus = all(isinstance(x, numbers.Integral) and 0 <= x < topo.num_gpus for x in (u, v))
            if not len(hit) and gpus and u != v:  # two GPUs with no cable between them: their path, both ways
                hit = np.unique(topo.route([u, v], [v, u])[1])
        else:
            hit = np.zeros(0, np.int64)
        if not len(hit):
            raise ValueError(f"virtual.run: degrade key {key!r} names no link of {topo.name}")
        bw[hit] /= factor
    return replace(topo, link_bw=bw)


def _check_slow(slow, p: int) -> dict[int, float]:
    slow = dict(slow or {})
    for r, f in slow.items():
        if not isinstance(r, numbers.Integral) or not 0 <= r < p:
            raise ValueError(f"virtual.run: slow= names rank {r!r}; ranks are 0..{p - 1}")
        if not isinstance(f, numbers.Real) or not f > 0 or not math.isfinite(f):
            raise ValueError(f"virtual.run: slow factor of rank {r} must be a finite number > 0, got {f!r}")
    return {int(r): float(f) for r, f in slow.items()}


def _hooks(setup, dist: bool) -> list:
    hooks = list(setup or ())
    if dist:
        try:
            torchpg = importlib.import_module("mycollectives.torchpg")
        except ImportError as e:
            raise ValueError(
                "virtual.run(dist=True) needs mycollectives.torchpg (torch.distributed on a run)"
            ) from e
        hook = getattr(torchpg, "setup", None) or getattr(torchpg, "virtual_setup", None)
        if hook is None:
            raise ValueError(
                "virtual.run(dist=True): mycollectives.torchpg has no setup(rank, world_size) hook"
            )
        hooks.append(hook)
    else:  # torch.distributed without opting in: a rank's init_process_group joins the run
        from ..torchpg.ondemand import setup as on_demand

        hooks.append(on_demand)
    for h in hooks:
        if not callable(h):
            raise TypeError(f"virtual.run: every setup= hook must be callable(rank, world_size), got {h!r}")
    return hooks


def run(
    fn: Callable,
    cluster: str | Topology = "dgx_h100",
    nodes: int = 1,
    args: Sequence = (),
    *,
    slow: dict | None = None,
    degrade: dict | None = None,
    protocol: str = "simple",
    world_size: int | None = None,
    setup: Sequence[Callable] = (),
    dist: bool = False,
    timeout: float | None = None,
    **cluster_kw,
) -> Run:
    """Run ``fn(rank, *args)`` on every GPU of ``cluster`` in virtual time; see ``mycollectives.virtual``."""
    if not callable(fn):
        raise TypeError(f"virtual.run: argument 'fn' must be callable, got {fn!r}")
    topo = topology_of(cluster, nodes, degrade, **cluster_kw)
    p = topo.num_gpus if world_size is None else world_size
    if not isinstance(p, numbers.Integral) or isinstance(p, bool) or not 1 <= p <= topo.num_gpus:
        raise ValueError(f"virtual.run: world_size must be an int in 1..{topo.num_gpus}, got {world_size!r}")
    slow, hooks = _check_slow(slow, p), _hooks(setup, dist)
    if timeout is not None and (not isinstance(timeout, numbers.Real) or not timeout > 0):
        raise ValueError(
            f"virtual.run: timeout must be a positive number of wall-clock seconds, got {timeout!r}"
        )
    wall = float(timeout or os.environ.get(WALL_ENV, 900.0))
    roof, fp32 = roofline_of(topo), roofline_of(topo, torch.float32)
    net = Metered(LinkModel(topo, protocol))
    maestro = _m.Maestro(net, wall)
    world = Cluster(maestro, net, wall, p)
    results: list = [None] * p
    charges: list = [None] * p

    def body(actor: _m.Actor) -> None:
        r = actor.rank
        charges[r] = actor.state["charge"] = Charge(actor, roof, slow.get(r, 1.0), world.span, fp32)
        with _rank(VirtualTransport(world, tuple(range(p)), r, local_size=topo.gpus_per_node), hooks):
            with charges[r]:
                results[r] = fn(r, *args)

    actors = [maestro.spawn(r, f"rank {r}", r, body) for r in range(p)]
    t0 = time.perf_counter()
    maestro.start()
    _raise_first(maestro, topo)
    stats = {
        "flows": net.flows,
        "bytes": net.bytes,
        "switches": maestro.switches,
        "wall_s": time.perf_counter() - t0,
        "sent": net.sent,
    }
    flops = [c.flops if c is not None else 0.0 for c in charges]
    elapsed = max(a.clock for a in maestro.actors)
    clocks = [a.clock for a in actors]
    return Run(results, elapsed, clocks, topo, roof, world.spans, flops, stats, calls_of(world))


@contextlib.contextmanager
def _rank(transport: VirtualTransport, hooks: list):
    """A rank's thread: its transport is what ``group=None`` means, and the setup hooks' contexts are held."""
    with bind(transport), contextlib.ExitStack() as stack:
        for h in hooks:
            cm = h(transport.rank, transport.world_size)
            if cm is not None:
                stack.enter_context(cm)
        yield


def _raise_first(maestro: _m.Maestro, topo: Topology) -> None:
    """Re-raise the first failure, its message naming the rank where it did not already."""
    if maestro.failed:
        actor, first = maestro.failed[0]
        where = f"rank {actor.rank}"
        if where not in str(first) and first.args and isinstance(first.args[0], str):
            first.args = (f"{where} of a virtual run: {first.args[0]}", *first.args[1:])
        first.add_note(f"(raised on {where} of a virtual run on {topo.name}, {len(maestro.actors)} actors)")
        raise first
