"""The virtual cluster's network: messages as flows sharing links max-min fairly, in virtual time.

A message from GPU ``a`` to GPU ``b`` is a *flow* over ``topology.route(a, b)``
(on its channel's rail between nodes, ``Topology.route``). It waits its
latency, then moves its bytes at the rate max-min fairness gives it among
every flow in flight (:func:`mycollectives.sim.fluid.max_min_rates`),
re-shared whenever a flow starts or ends. Capacities and latencies come from
:class:`mycollectives.sim.engine.LinkModel`, the round simulator's own model:
one model, two engines. A message's latency is the protocol's step latency
for the slowest class of link on its own route plus its hops'
(:meth:`Network.step_latency`), whatever else is in flight. The round
simulator starts a round's flows together and ends the round when the last
is done; here every flow starts when its sender posts it, and nothing waits
for a round to end, so ranks that compute, straggle or run several streams
meet the traffic that is really in flight.
"""

from __future__ import annotations

import heapq

import numpy as np

from ..sim.engine import LinkModel
from ..sim.fluid import Paths, max_min_rates
from .fairshare import SMALL, fair_rates
from .maestro import Activity

INF = float("inf")


class Flow:
    __slots__ = ("id", "links", "route", "nbytes", "left", "since", "rate", "finish", "done")

    def __init__(self, fid: int, links: np.ndarray, nbytes: int, done: Activity, route: list[int]):
        self.id, self.links, self.nbytes, self.left = fid, links, float(nbytes), float(nbytes)
        self.route = route  # its links as ints (fairshare.py)
        self.since = 0.0  # when ``left`` was last brought up to date (its rate changes only then)
        self.rate, self.finish, self.done = 0.0, INF, done


class Network:
    """Flows in flight on one topology (see the module)."""

    def __init__(self, model: LinkModel):
        self.model, self.topo = model, model.topo
        self.now = 0.0
        self._starting: list[tuple[float, int, Flow]] = []  # (time the latency is over, id, flow)
        self._active: list[Flow] = []
        self._soonest = INF  # when the first flow in flight finishes
        self._routes: dict[tuple[int, int], np.ndarray] = {}
        self._lists: dict[tuple[int, int, int], list[int]] = {}  # the same as lists of ints
        self._cap: dict[int, float] = {}  # each link's capacity, as the model gives it
        self._latency: dict[tuple[int, int], float] = {}
        self._ids = 0
        self.flows = 0  # flows posted so far
        self.bytes = 0

    def links(self, src: int, dst: int, rail: int = -1) -> np.ndarray:
        """The links of a message's route (``rail`` >= 0: between nodes on that rail)."""
        key = (src, dst, rail)
        hit = self._routes.get(key)
        if hit is None:
            topo = self.topo
            if rail >= 0 and topo.nics_per_node and int(topo.node_of(src)) != int(topo.node_of(dst)):
                # Topology.route on a rail: three plain legs (NVLink, the rail, NVLink), each kept apart,
                # since many messages share a leg
                a, b = int(topo.rail_gpu(src, rail)), int(topo.rail_gpu(dst, rail))
                hit = np.concatenate([self.links(src, a), self.links(a, b), self.links(b, dst)])
            else:
                _, hit = topo.route([src], [dst])
            self._routes[key] = hit
        return hit

    def step_latency(self, src: int, dst: int, rail: int = -1) -> float:
        """A message's latency: the protocol's step latency for the slowest class of link on its
        route, plus the route's hop latencies (``LinkModel.latency`` of a round of one message)."""
        key = (src, dst, rail)
        hit = self._latency.get(key)
        if hit is None:
            links = self.links(src, dst, rail)
            hit = self._latency[key] = self.model.path_latency(links)
        return hit

    def p2p_latency(self, src: int, dst: int) -> float:
        """A lone message's latency (a send is a call of its own): base latency plus its step latency."""
        return self.model.base_latency + self.step_latency(src, dst)

    def post(
        self, src: int, dst: int, nbytes: int, latency: float, done: Activity, maestro, rail: int = -1
    ) -> None:
        """Start a flow now; ``done`` fires when its last byte has arrived."""
        self._ids += 1
        self.flows += 1
        self.bytes += nbytes
        links = self.links(src, dst, rail)
        if nbytes <= 0 or not len(links):
            if latency <= 0:
                maestro.fire(done, self.now)
                return
            links = links[:0]
        route = self._lists.get((src, dst, rail))
        if route is None:
            route = self._lists[(src, dst, rail)] = links.tolist()
        flow = Flow(self._ids, links, nbytes, done, route if len(links) else [])
        heapq.heappush(self._starting, (self.now + latency, flow.id, flow))

    def next_time(self) -> float:
        t = self._starting[0][0] if self._starting else INF
        return min(t, self._soonest)

    def advance(self, t: float, maestro) -> None:
        """Move every flow to virtual time ``t`` (no event lies before it); fire what ends there."""
        changed = False
        if self._active and t >= self._soonest:  # a flow due now still ends (else a run can stall)
            keep = []
            for f in self._active:
                if f.finish <= t:
                    maestro.fire(f.done, f.finish)
                    changed = True
                else:
                    keep.append(f)
            self._active = keep
        self.now = max(self.now, t)
        while self._starting and self._starting[0][0] <= t:
            _, _, f = heapq.heappop(self._starting)
            if f.left <= 0 or not len(f.links):
                maestro.fire(f.done, self.now)
                continue
            f.since = self.now
            self._active.append(f)
            changed = True
        if changed and self._active:
            self._reshare()
        elif not self._active:
            self._soonest = INF

    def _reshare(self) -> None:
        """Max-min fair rates of the flows in flight, and when each would finish at them."""
        act = self._active
        if len(act) <= SMALL:
            rate = self._fair(act)
        else:
            rate = self._fair_numpy(act)
        soonest, now = INF, self.now
        for f, r in zip(act, rate):
            f.left -= f.rate * (now - f.since)  # what it moved at its old rate
            f.rate, f.since = r, now
            f.finish = now + f.left / r
            soonest = min(soonest, f.finish)
        self._soonest = soonest  # the next flow to finish, until the flows in flight change

    def _fair(self, act: list[Flow]) -> list[float]:
        """:func:`~.fairshare.fair_rates` of a few flows, each link's capacity as the model gives it."""
        cap = self._cap
        for f in act:
            for link in f.route:
                if link not in cap:
                    cap[link] = float(self.model.capacity(np.array([link]))[0])
        return fair_rates([f.route for f in act], cap)

    def _fair_numpy(self, act: list[Flow]) -> list[float]:
        sizes = np.fromiter((len(f.links) for f in act), np.int64, len(act))
        flow = np.repeat(np.arange(len(act)), sizes)
        link = np.concatenate([f.links for f in act])
        paths = Paths.of(flow, link, len(act))
        return max_min_rates(paths, self.model.capacity(paths.links), np.ones(len(act), bool)).tolist()
