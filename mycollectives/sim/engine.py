"""The simulator: a schedule's rounds on a topology (chapter 4).

Each round of a schedule becomes a set of flows, one per (source,
destination) message; the topology routes them; the links are shared max-min
fairly (``fluid.py``). A round lasts the protocol's per-step latency for the
slowest class of link it crosses, plus the time to drain its flows; rounds
run one after another, as their meaning in ``schedule.py`` says. Rounds that
repeat a pattern already seen (a ring's ``2(p-1)`` steps all look alike)
reuse its routes and result, which is what makes thousands of ranks cheap;
``cache=False`` turns that off, and the tests check both give one answer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..algorithms import algorithms as menu
from ..algorithms import build, canonical, spec_for
from ..collectives import busbw_factor
from ..nccl.constants import HW_LATENCY
from ..schedule import Round
from ..topology import Topology
from ..topology import protocol as get_protocol
from .fluid import Paths, drain
from .result import SimResult

NVLS_LATENCY = HW_LATENCY["NVLink"]["NVLS"]["Simple"] * 1e-6  # NCCL's hwLat for NVLS, seconds (nccl_tuning)


class LinkModel:
    """The one link model of both engines: how long a transfer takes on ``topo`` under ``proto``.

    A link carries ``link_bw * efficiency * cap_scale`` bytes/s, shared max-min
    fairly (``fluid.py``) among the flows that cross it. A round (a set of
    flows that start together) pays the protocol's step latency for the
    slowest class of link any of its flows crosses, plus its longest path's
    hop latencies; a collective pays ``base_latency`` once. The round simulator
    (:func:`simulate`) and the virtual cluster (:mod:`mycollectives.virtual`)
    both price transfers here.
    """

    def __init__(self, topo: Topology, proto="simple", cap_scale: float = 1.0):
        self.topo, self.proto = topo, get_protocol(proto)
        self.cap_scale = cap_scale
        self._per_link: tuple[list, list] | None = None  # link classes and latencies as lists (path_latency)

    @property
    def base_latency(self) -> float:
        return self.proto.base_latency

    def capacity(self, links: np.ndarray) -> np.ndarray:
        """Usable bytes/s of ``links`` under the protocol."""
        return self.topo.link_bw[links] * self.proto.efficiency * self.cap_scale

    def latency(self, flow: np.ndarray, link: np.ndarray, nflows: int) -> float:
        """The latency of a round whose flows cross ``link[j]`` for ``flow[j]`` (as ``Topology.route``)."""
        if not len(link):
            return 0.0
        cls = np.zeros(nflows, np.int64)
        np.maximum.at(cls, flow, self.topo.link_class[link])
        lat = np.bincount(flow, weights=self.topo.link_lat[link], minlength=nflows)
        used = np.unique(cls[np.bincount(flow, minlength=nflows) > 0])
        return float(max(self.proto.round_latency(int(c)) for c in used) + lat.max())

    def path_latency(self, links: np.ndarray) -> float:
        """:meth:`latency` of one flow over ``links``, float for float, without NumPy's fixed costs (the
        virtual cluster asks it once per route): its slowest class's step latency plus its hops', summed
        in order as ``np.bincount`` sums them."""
        if not len(links):
            return 0.0
        if self._per_link is None:
            self._per_link = (self.topo.link_class.tolist(), self.topo.link_lat.tolist())
        cls, lat = self._per_link
        slowest, total = 0, 0.0
        for k in links.tolist():
            slowest = max(slowest, cls[k])
            total += lat[k]
        return float(self.proto.round_latency(int(slowest)) + total)

    def round_latency(self, src: np.ndarray, dst: np.ndarray, rail=None) -> float:
        """The latency of one round of transfers ``src[i] -> dst[i]`` (GPUs; ``rail`` as ``Topology.route``)."""
        flow, link = self.topo.route(src, dst, rail)
        return self.latency(flow, link, len(src))


class _Rounds:
    """Routes and results of the round patterns met so far in one simulation."""

    def __init__(self, model: LinkModel, cache: bool):
        self.model, self.topo, self.cache = model, model.topo, cache
        self.paths: dict[bytes, tuple] = {}
        self.results: dict[bytes, tuple] = {}

    def route(self, src: np.ndarray, dst: np.ndarray, rail: np.ndarray):
        key = src.tobytes() + dst.tobytes() + rail.tobytes()
        hit = self.paths.get(key) if self.cache else None
        if hit is None:
            flow, link = self.topo.route(src, dst, rail if (rail >= 0).any() else None)
            hit = (Paths.of(flow, link, len(src)), self.model.latency(flow, link, len(src)))
            if self.cache:
                self.paths[key] = hit
        return hit

    def run(self, src, dst, nbytes, rail):
        """Duration, bytes per link and busiest link of one round of flows (``rail``: each one's, or -1)."""
        key = src.tobytes() + dst.tobytes() + nbytes.tobytes() + rail.tobytes()
        hit = self.results.get(key) if self.cache else None
        if hit is None:
            paths, latency = self.route(src, dst, rail)
            cap = self.model.capacity(paths.links)
            t, _ = drain(paths, cap, nbytes)
            per_link = np.bincount(paths.local, weights=nbytes[paths.flow], minlength=len(paths.links))
            busiest = int(paths.links[np.argmax(per_link / cap)]) if len(per_link) else -1
            hit = (latency + t, paths.links, per_link, busiest)
            if self.cache:
                self.results[key] = hit
        return hit


def round_messages(r: Round, p: int, itemsize: int, rails: int = 1 << 30):
    """Remote transfers of a round merged into messages: (src, dst, bytes, rail), as the executor
    merges them (``plan.py``); a message's rail is its transfers' channel modulo ``rails`` (the
    schedule's ranks per node), -1 where they differ."""
    remote = r.src != r.dst
    src, dst, nb, ch = r.src[remote], r.dst[remote], r.count[remote] * itemsize, r.channel[remote]
    ch = np.where(ch >= 0, ch % rails, -1)
    key = src * p + dst
    if len(key) > 1 and not (np.diff(key) > 0).all():
        key, inv = np.unique(key, return_inverse=True)
        nb = np.bincount(inv, weights=nb).astype(np.int64)
        lo, hi = np.full(len(key), ch.max(initial=0)), np.full(len(key), ch.min(initial=0))
        np.minimum.at(lo, inv, ch)
        np.maximum.at(hi, inv, ch)
        src, dst, ch = key // p, key % p, np.where(lo == hi, lo, -1)  # (channels sharing a rail: see plan.py)
    return src, dst, nb, ch


def simulate(
    collective: str,
    algorithm: str,
    nbytes: int,
    topology: Topology,
    *,
    protocol: str = "simple",
    world_size: int | None = None,
    itemsize: int = 4,
    segment: int | None = None,
    local_size: int | None = None,
    root: int = 0,
    cache: bool = True,
    record_links: bool | None = None,
    channels: int = 1,
) -> SimResult:
    """Simulate ``algorithm`` for a collective of ``nbytes`` (nccl-tests' ``size``) on ``topology``.

    Ranks are GPUs ``0..world_size-1`` (all of them by default). The result
    carries ``time_s``, ``algbw`` and ``busbw`` (GB/s, nccl-tests'
    definitions), a per-round timeline and per-link utilisation.
    ``algorithm`` is one of ``algorithms(collective)``: a schedule of the package's
    menu, or one the switch runs (``IN_SWITCH``: ``"nvls"``, all-reduce only, reduces
    inside the NVSwitch, on a topology built with ``nvls=True``). ``channels`` cuts
    the schedule into that many channels, each between nodes on its own rail. Introduced in chapter 4.

    >>> from mycollectives.topology import dgx_h100
    >>> r = simulate("all_reduce", "ring", 1 << 30, dgx_h100())
    >>> 300 < r.busbw < 371
    True
    """
    p = world_size or topology.num_gpus
    if p > topology.num_gpus:
        raise ValueError(f"world_size={p} exceeds the {topology.num_gpus} GPUs of {topology.name}")
    model = LinkModel(topology, protocol)
    extra_lat, local = 0.0, local_size or topology.gpus_per_node
    switch = IN_SWITCH.get(algorithm)
    if switch is not None:
        if canonical(collective) not in switch.collectives:
            raise ValueError(
                f"algorithm {algorithm!r} runs {' and '.join(switch.collectives)}, not {collective}"
            )
        rounds, extra_lat = switch.flows(collective, nbytes, topology, p), switch.latency
        model.cap_scale = topology.in_switch_reduction
    else:
        rounds = schedule_rounds(collective, algorithm, p, nbytes, itemsize, root, segment, local, channels)
    n = len(rounds)
    if record_links is None:
        record_links = n * topology.num_links <= 4_000_000
    timeline = _Timeline(n, topology.num_links, record_links)
    state = _Rounds(model, cache)
    for i, item in enumerate(rounds):
        src, dst, nb, rail = (
            round_messages(item, p, itemsize, local) if isinstance(item, Round) else (*item, None)
        )
        if len(src):
            rail = np.full(len(src), -1, np.int64) if rail is None else rail
            timeline.add(i, len(src), extra_lat, *state.run(src, dst, nb, rail))
    return timeline.result(collective, algorithm, nbytes, p, model)


def schedule_rounds(
    collective, algorithm, p, nbytes, itemsize=4, root=0, segment=None, local_size=None, channels=1
):
    """The rounds of ``algorithm``'s schedule for a call of ``nbytes`` (``segment`` in elements)."""
    spec = spec_for(
        collective,
        algorithm,
        p,
        nbytes,
        itemsize,
        root=root,
        segment_bytes=segment * itemsize if segment else None,
        local_size=local_size,
        channels=channels,
    )
    return list(build(spec, algorithm).rounds)


class _Timeline:
    """Per-round durations, flows, busiest links and bytes per link, filled as rounds run."""

    def __init__(self, n: int, num_links: int, record_links: bool):
        self.dur = np.zeros(n)
        self.flows = np.zeros(n, np.int64)
        self.busiest = np.full(n, -1, np.int64)
        self.link_bytes = np.zeros(num_links)
        self.per_round = np.zeros((n, num_links), np.float32) if record_links else None

    def add(self, i: int, flows: int, extra: float, t: float, links, lbytes, busiest: int) -> None:
        self.dur[i], self.flows[i], self.busiest[i] = t + extra, flows, busiest
        self.link_bytes[links] += lbytes
        if self.per_round is not None:
            self.per_round[i, links] = lbytes

    def result(self, collective: str, algorithm: str, nbytes: int, p: int, model: LinkModel) -> SimResult:
        n, base = len(self.dur), model.base_latency
        return SimResult(
            collective=canonical(collective),
            algorithm=algorithm,
            protocol=model.proto.name,
            nbytes=int(nbytes),
            world_size=p,
            topology=model.topo,
            time_s=float(base + self.dur.sum() if n else 0.0),
            bus_factor=busbw_factor(collective, p),
            round_start=base + np.concatenate([[0.0], np.cumsum(self.dur)[:-1]]) if n else np.zeros(0),
            round_time=self.dur,
            round_flows=self.flows,
            round_busiest=self.busiest,
            link_bytes=self.link_bytes,
            round_link_bytes=self.per_round,
        )


def _nvls(collective: str, nbytes: int, topo: Topology, p: int):
    """NVLink SHARP all-reduce: every GPU pushes its vector into the switch and
    pulls the sum back, ``1/p`` reduced by each GPU's share, both halves
    pipelined: up ``n (1 + 1/p)``, down ``n (1 + 1/p)`` per GPU, one round."""
    if not topo.in_switch_reduction:
        raise ValueError(f"{topo.name} has no in-switch reduction (build it with nvls=True)")
    if p > topo.gpus_per_node:
        raise ValueError("nvls here runs inside one NVSwitch node")
    tier = next(t for t in topo.tiers if t.name == "nvswitch")
    g = np.arange(p)
    sw = tier.parent[g]
    nb = np.full(p, int(nbytes) + int(nbytes) // p, dtype=np.int64)
    # two flows per GPU, up to and down from its switch, each over one link
    return [(np.concatenate([g, sw]), np.concatenate([sw, g]), np.concatenate([nb, nb]))]


@dataclass(frozen=True)
class InSwitch:
    """An algorithm the switch runs, beside the schedules of ``algorithms/``: its flows (one round
    of ``(src, dst, bytes)`` arrays over GPUs and switches), the latency each round adds, and the
    collectives it runs. Its links carry the topology's ``in_switch_reduction`` of their rate."""

    collectives: tuple[str, ...]
    flows: Callable[[str, int, Topology, int], list]
    latency: float


IN_SWITCH: dict[str, InSwitch] = {"nvls": InSwitch(("all_reduce",), _nvls, NVLS_LATENCY)}


def algorithms(collective: str) -> tuple[str, ...]:
    """What :func:`simulate` runs for ``collective``: the package's menu, then the switch's own.

    >>> algorithms("all_reduce")[-1], "nvls" in algorithms("broadcast")
    ('nvls', False)
    """
    c = canonical(collective)
    return menu(c) + tuple(name for name, a in IN_SWITCH.items() if c in a.collectives)
