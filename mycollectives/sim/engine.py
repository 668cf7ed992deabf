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

import numpy as np

from ..algorithms import build, canonical, spec_for
from ..collectives import busbw_factor
from ..nccl.constants import HW_LATENCY
from ..schedule import Round
from ..topology import Topology
from ..topology import protocol as get_protocol
from .fluid import Paths, drain
from .result import SimResult

NVLS_LATENCY = HW_LATENCY["NVLink"]["NVLS"]["Simple"] * 1e-6  # NCCL's hwLat for NVLS, seconds (nccl_tuning)


class _Rounds:
    """Routes and results of the round patterns met so far in one simulation."""

    def __init__(self, topo: Topology, proto, cache: bool):
        self.topo, self.proto, self.cache = topo, proto, cache
        self.paths: dict[bytes, tuple] = {}
        self.results: dict[bytes, tuple] = {}

    def route(self, src: np.ndarray, dst: np.ndarray):
        key = src.tobytes() + dst.tobytes()
        hit = self.paths.get(key) if self.cache else None
        if hit is None:
            flow, link = self.topo.route(src, dst)
            paths = Paths.of(flow, link, len(src))
            cls = np.zeros(len(src), np.int64)
            np.maximum.at(cls, flow, self.topo.link_class[link])
            lat = np.bincount(flow, weights=self.topo.link_lat[link], minlength=len(src))
            step = max(self.proto.round_latency(int(c)) for c in np.unique(cls))
            hit = (paths, float(step + lat.max()))
            if self.cache:
                self.paths[key] = hit
        return hit

    def run(self, src, dst, nbytes, cap_scale=1.0):
        """Duration, bytes per link and busiest link of one round of flows."""
        key = src.tobytes() + dst.tobytes() + nbytes.tobytes()
        hit = self.results.get(key) if self.cache else None
        if hit is None:
            paths, latency = self.route(src, dst)
            cap = self.topo.link_bw[paths.links] * self.proto.efficiency * cap_scale
            t, _ = drain(paths, cap, nbytes)
            per_link = np.bincount(paths.local, weights=nbytes[paths.flow], minlength=len(paths.links))
            busiest = int(paths.links[np.argmax(per_link / cap)]) if len(per_link) else -1
            hit = (latency + t, paths.links, per_link, busiest)
            if self.cache:
                self.results[key] = hit
        return hit


def _messages(r: Round, p: int, itemsize: int):
    """Remote transfers of a round merged into messages: (src, dst, bytes)."""
    remote = r.src != r.dst
    src, dst, nb = r.src[remote], r.dst[remote], r.count[remote] * itemsize
    key = src * p + dst
    if len(key) > 1 and not (np.diff(key) > 0).all():
        key, inv = np.unique(key, return_inverse=True)
        nb = np.bincount(inv, weights=nb).astype(np.int64)
        src, dst = key // p, key % p
    return src, dst, nb


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
) -> SimResult:
    """Simulate ``algorithm`` for a collective of ``nbytes`` (nccl-tests' ``size``) on ``topology``.

    Ranks are GPUs ``0..world_size-1`` (all of them by default). The result
    carries ``time_s``, ``algbw`` and ``busbw`` (GB/s, nccl-tests'
    definitions), a per-round timeline and per-link utilisation.
    ``algorithm="nvls"`` (all-reduce only) reduces inside the NVSwitch, on a
    topology built with ``nvls=True``. Introduced in chapter 4.

    >>> from mycollectives.topology import dgx_h100
    >>> r = simulate("all_reduce", "ring", 1 << 30, dgx_h100())
    >>> 300 < r.busbw < 371
    True
    """
    p = world_size or topology.num_gpus
    if p > topology.num_gpus:
        raise ValueError(f"world_size={p} exceeds the {topology.num_gpus} GPUs of {topology.name}")
    proto = get_protocol(protocol)
    if algorithm == "nvls":
        rounds, cap_scale, extra_lat = (
            _nvls(collective, nbytes, topology, p),
            topology.in_switch_reduction,
            NVLS_LATENCY,
        )
    else:
        spec = spec_for(
            collective,
            algorithm,
            p,
            nbytes,
            itemsize,
            root=root,
            segment_bytes=segment * itemsize if segment else None,
            local_size=local_size or topology.gpus_per_node,
        )
        rounds = list(build(spec, algorithm).rounds)
        cap_scale, extra_lat = 1.0, 0.0
    state = _Rounds(topology, proto, cache)
    n = len(rounds)
    if record_links is None:
        record_links = n * topology.num_links <= 4_000_000
    dur = np.zeros(n)
    flows = np.zeros(n, np.int64)
    busiest = np.full(n, -1, np.int64)
    link_bytes = np.zeros(topology.num_links)
    per_round = np.zeros((n, topology.num_links), np.float32) if record_links else None
    for i, item in enumerate(rounds):
        src, dst, nb = _messages(item, p, itemsize) if isinstance(item, Round) else item
        if not len(src):
            continue
        t, links, lbytes, big = state.run(src, dst, nb, cap_scale)
        dur[i], flows[i], busiest[i] = t + extra_lat, len(src), big
        link_bytes[links] += lbytes
        if per_round is not None:
            per_round[i, links] = lbytes
    total = proto.base_latency + dur.sum() if n else 0.0
    return SimResult(
        collective=canonical(collective),
        algorithm=algorithm,
        protocol=proto.name,
        nbytes=int(nbytes),
        world_size=p,
        topology=topology,
        time_s=float(total),
        bus_factor=busbw_factor(collective, p),
        round_start=proto.base_latency + np.concatenate([[0.0], np.cumsum(dur)[:-1]]) if n else np.zeros(0),
        round_time=dur,
        round_flows=flows,
        round_busiest=busiest,
        link_bytes=link_bytes,
        round_link_bytes=per_round,
    )


def _nvls(collective: str, nbytes: int, topo: Topology, p: int):
    """NVLink SHARP all-reduce: every GPU pushes its vector into the switch and
    pulls the sum back, ``1/p`` reduced by each GPU's share, both halves
    pipelined: up ``n (1 + 1/p)``, down ``n (1 + 1/p)`` per GPU, one round."""
    if canonical(collective) != "all_reduce":
        raise ValueError("algorithm 'nvls' is an all_reduce")
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
