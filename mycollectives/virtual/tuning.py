"""What NCCL would run, inside a virtual run (chapter "The virtual cluster").

A collective called with ``algorithm="auto"`` (the default, through ``mc.*``
or torch.distributed) in a rank of :func:`mycollectives.virtual.run` runs what
NCCL 2.30.7's tuner picks for the group's GPUs on the run's topology and the
call's size (:func:`mycollectives.sim.tuner.nccl_call`: algorithm, protocol,
channels, from the package's one model of NCCL's tuner and search). The
choice prices the call:

* NCCL's algorithm has a schedule here (Ring, Tree, PAT, all-to-all): that
  schedule runs, its messages flows on the links, at the chosen protocol's
  latencies and wire efficiency (LL puts a flag beside every 4 bytes of data);
* it has none (NVLS, NVLSTree, CollNet): the nearest schedule runs, so the data
  arrive as NCCL's would, but its messages cost nothing and the call takes the
  time NCCL's algorithm takes on these links (:func:`~mycollectives.sim.simulate_nccl`,
  NVLS at its channels and ``nvlsEfficiency``), from the moment the last rank joins.

A call priced as flows runs on NCCL's channel count (the package's channel
transform, :mod:`mycollectives.algorithms.channels`: each channel its own ring
or tree, on its own rail between nodes); one priced by NCCL's model runs one
channel, which would not change its time. Every call is recorded in
:attr:`Run.calls <mycollectives.virtual.Run>` (a :class:`Called`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .. import auto
from ..algorithms import channels as _channels
from ..sim.engine import LinkModel
from ..sim.nccl import simulate_nccl
from ..sim.tuner import Choice, nccl_call
from . import maestro as _m

MAX_CALLS = 100_000  # calls a run records (a long training loop keeps its first ones)


@dataclass(frozen=True)
class Called:
    """One collective call of a virtual run, as NCCL would have run it."""

    gpus: tuple[int, ...]  # the group's GPUs
    choice: Choice  # NCCL's algorithm, protocol and channels; the schedule run
    channels_run: int  # channels the schedule ran on
    priced: str  # "flows" (the schedule's messages on the links) or "NCCL's model"
    seconds: float  # NCCL's algorithm's time on these links, where priced by NCCL's model

    @property
    def collective(self) -> str:
        return self.choice.collective

    @property
    def nbytes(self) -> int:
        return self.choice.nbytes


def shape(topo, gpus: tuple[int, ...]) -> tuple[int, int] | None:
    """(nodes, GPUs per node) of a group, or None where the nodes hold different numbers of its GPUs."""
    per: dict[int, int] = {}
    for g in gpus:
        per[g // topo.gpus_per_node] = per.get(g // topo.gpus_per_node, 0) + 1
    counts = set(per.values())
    return (len(per), counts.pop()) if len(counts) == 1 else None


def _filled(topo, nodes: int, local: int) -> bool:
    """Whether NCCL's link-level model can price this shape (whole nodes, or part of one)."""
    return nodes == 1 or local == topo.gpus_per_node


_SERVED: list[type] = []  # the transports a virtual run's ranks hold (``transport.py`` names its own)


def serves(kind: type) -> None:
    """Let :func:`tuner` and :func:`channels` answer for transports of ``kind`` (a virtual run's)."""
    if kind not in _SERVED:
        _SERVED.append(kind)


def tuner(collective: str, transport, nbytes: int, *, itemsize: int = 4, op: str | None = None) -> str | None:
    """:func:`mycollectives.auto.add_tuner`'s hook: NCCL's choice for a rank of a virtual run."""
    actor = _m.current_or_none()
    if actor is None or not isinstance(transport, tuple(_SERVED)) or transport.world_size < 2:
        return None
    world = transport.cluster
    topo = world.net.topo
    where = shape(topo, transport.gpus)
    if where is None:
        return None
    dtype = {1: "int8", 2: "bfloat16", 8: "float64"}.get(itemsize, "float32")
    choice = nccl_call(collective, nbytes, topo, *where, op=op or "sum", dtype=dtype)
    if choice is None:
        return None
    if choice.schedule == "hierarchical" and transport.local_size != where[1]:
        choice = replace(choice, schedule="ring")  # a group of other nodes than the run's: flat
    key = (transport.gpus, choice)
    called = world.priced.get(key)
    if called is None:
        if len(world.priced) >= 65536:
            world.priced.clear()
        called = world.priced[key] = replace(_price(topo, choice, where), gpus=transport.gpus)
    actor.state["nccl"] = called  # read by this call's channels (:func:`channels`) and its first message
    if transport.rank == 0 and len(world.nccl_calls) < MAX_CALLS:
        world.nccl_calls.append(called)
    return choice.schedule


def _price(topo, choice: Choice, where: tuple[int, int]) -> Called:
    nodes, local = where
    if choice.exact or not _filled(topo, nodes, local):  # send/recv (all-to-all) runs outside channels
        return Called((), choice, choice.channels if choice.algorithm != "P2P" else 1, "flows", 0.0)
    sim = simulate_nccl(
        choice.collective, choice.algorithm, choice.nbytes, topo, protocol=choice.protocol,
        world_size=nodes * local,
    )  # fmt: skip
    return Called((), choice, 1, "NCCL's model", sim.time_s)


class Pricing:
    """How one call's messages are priced on a rank: at the protocol NCCL picked (its base and step
    latencies, and its bytes on the wire: LL sends a flag with every 4 bytes of data), or, where the
    call runs the nearest schedule, free messages after NCCL's time for the call."""

    def __init__(self, world, called: Called | None):
        base = world.net.model
        proto = base.proto.name if called is None else called.choice.protocol.lower()
        self.world, self.free = world, called is not None and called.priced != "flows"
        key = ("model", proto)
        if key not in world.priced:
            world.priced[key] = (
                base if proto == base.proto.name else LinkModel(base.topo, proto, base.cap_scale)
            )
        self.model = world.priced[key]
        self.start = called.seconds if self.free else self.model.base_latency
        self.wire = base.proto.efficiency / self.model.proto.efficiency

    def step_latency(self, src: int, dst: int, rail: int) -> float:
        """A message's latency under this call's protocol (``Network.step_latency``'s, at the run's)."""
        net = self.world.net
        if self.model is net.model:
            return net.step_latency(src, dst, rail)
        key = (self.model.proto.name, src, dst, rail)
        hit = self.world.priced.get(key)
        if hit is None:
            links = net.links(src, dst, rail)
            hit = self.world.priced[key] = self.model.path_latency(links)
        return hit


def channels(collective: str, nbytes: int, transport) -> int | None:
    """:func:`mycollectives.algorithms.channels.add_default`'s hook: the channels of the call whose
    algorithm :func:`tuner` just chose on this rank (NCCL's count where its messages are priced as
    flows; one where NCCL's model prices the call, which the channels would not change)."""
    actor = _m.current_or_none()
    called = None if actor is None else actor.state.get("nccl")
    if called is None or not isinstance(transport, tuple(_SERVED)):
        return None
    return called.channels_run if (called.gpus, called.nbytes) == (transport.gpus, nbytes) else None


auto.add_tuner(tuner)
_channels.add_default(channels)  # before the run's own default (mycollectives.virtual): NCCL's choice
