"""``virtual.run``: a function on every GPU of a modelled cluster, in virtual time."""

from __future__ import annotations

import contextlib
import importlib
import numbers
import os
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from .. import datafree, flight
from ..cliargs import finite, from_env
from ..memory.roofline import Roofline
from ..sim.engine import LinkModel
from ..topology import PRESETS, Topology, cluster
from ..topology.nodes import NODES
from ..transport import bind
from . import maestro as _m
from . import tuning as _tuning
from .compute import Charge, _gpu_of, roofline_of
from .rates import Rates, rates_of
from .streams import calls_of
from .threads import check_threads
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
    stats: dict = field(default_factory=dict)  # flows, bytes, switches, wall seconds, bytes by link class
    calls: list[_tuning.Called] = field(repr=False, default_factory=list)  # NCCL's choice, call by call
    call_spans: list = field(repr=False, default_factory=list)  # [rank, lane, start, end, flight entry]

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
    finite(nodes, "nodes", least=1, integer=True, where="virtual.run")
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
            f"virtual.run: argument 'cluster' must be a Topology or one of {tuple(dict.fromkeys([*NODES, *PRESETS]))}, "
            f"got {cluster_!r}"
        )
    return degraded(topo, degrade) if degrade else topo


def degraded(topo: Topology, degrade: dict) -> Topology:
    """``topo`` with links slowed: ``{link: factor}`` (an index into ``topo.link_src``) or
    ``{(u, v): factor}``: the cable between vertices ``u`` and ``v`` (by index or name), both ways;
    for two GPUs with no cable between them, every link of the path between them, both ways."""
    bw = topo.link_bw.copy()
    for key, factor in degrade.items():
        finite(factor, f"degrade[{key!r}]", least=1, where="virtual.run")
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
        finite(f, f"slow[{r}]", above=0, where="virtual.run")
    return {int(r): float(f) for r, f in slow.items()}


def _hooks(setup, dist: bool) -> list:
    if callable(setup) or not isinstance(setup, (list, tuple)):
        raise TypeError(
            f"virtual.run: argument 'setup' must be a list of callables(rank, world_size), got {setup!r}"
        )
    hooks = list(setup)
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


def _checked(args, data, timeout) -> float:
    """``run``'s ``args`` and ``data`` checked; the wall-clock limit, from ``timeout`` or the environment."""
    if isinstance(args, (str, bytes)) or not isinstance(args, (list, tuple)):
        raise TypeError(f"virtual.run: argument 'args' must be a tuple of fn's extra arguments, got {args!r}")
    if not isinstance(data, bool):
        raise TypeError(f"virtual.run: argument 'data' must be True or False, got {data!r}")
    if timeout is not None:
        return float(finite(timeout, "timeout", above=0, where="virtual.run"))
    return from_env(WALL_ENV, 900.0, above=0)


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
    data: bool = True,
    compute: str | Rates = "achieved",
    **cluster_kw,
) -> Run:
    """Run ``fn(rank, *args)`` on every GPU of ``cluster`` in virtual time; see ``mycollectives.virtual``."""
    if not callable(fn):
        raise TypeError(f"virtual.run: argument 'fn' must be callable, got {fn!r}")
    topo = topology_of(cluster, nodes, degrade, **cluster_kw)
    rates = rates_of(_gpu_of(topo), compute)  # "achieved" (default), "roofline" or Rates(...)
    p = topo.num_gpus if world_size is None else world_size
    finite(p, "world_size", least=1, most=topo.num_gpus, integer=True, where="virtual.run")
    wall = _checked(args, data, timeout)
    slow, hooks = _check_slow(slow, p), _hooks(setup, dist)
    check_threads(p)
    roof, fp32 = roofline_of(topo), roofline_of(topo, torch.float32)
    net = Metered(LinkModel(topo, protocol))
    maestro = _m.Maestro(net, wall)
    if not data:
        _DATA_FREE.add(maestro)
    world = Cluster(maestro, net, wall, p)
    results: list = [None] * p
    charges: list = [None] * p
    ends: list = [None] * p  # each rank's transport, kept to the end of the run: a rank that returned
    # still has its flight record when another fails

    def body(actor: _m.Actor) -> None:
        r = actor.rank
        charges[r] = actor.state["charge"] = Charge(actor, roof, slow.get(r, 1.0), world.span, fp32, rates)
        ends[r] = VirtualTransport(world, tuple(range(p)), r, local_size=min(topo.gpus_per_node, p))
        with _rank(ends[r], hooks):
            with charges[r]:
                results[r] = fn(r, *args)
        flight.returned(ends[r])

    t0 = time.perf_counter()
    try:
        actors = [maestro.spawn(r, f"rank {r}", r, body) for r in range(p)]
    except BaseException as e:  # a thread that would not start, Ctrl-C: stop those that did
        maestro.halt(e)
        raise
    maestro.start()
    _raise_first(maestro, topo)
    return _result(results, actors, charges, maestro, net, world, topo, roof, time.perf_counter() - t0)


def _result(results, actors, charges, maestro, net, world, topo, roof, wall_s: float) -> Run:
    """The :class:`Run` of a finished run: results, clocks, FLOPs, and what it reports of itself."""
    stats = {
        "flows": net.flows,
        "bytes": net.bytes,
        "switches": maestro.switches,
        "wall_s": wall_s,
        "sent": net.sent,
    }
    flops = [c.flops if c is not None else 0.0 for c in charges]
    elapsed = max(a.clock for a in maestro.actors)
    clocks = [a.clock for a in actors]
    out = Run(results, elapsed, clocks, topo, roof, world.spans, flops, stats, call_spans=calls_of(world))
    out.calls = world.nccl_calls
    return out


_DATA_FREE: weakref.WeakSet = weakref.WeakSet()  # the maestros of data-free runs


def _data_free() -> bool:
    actor = _m.current_or_none()
    return actor is not None and actor.maestro in _DATA_FREE


datafree.add_probe(_data_free)


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
