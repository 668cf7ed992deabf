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

Every call is recorded in :attr:`Run.calls <mycollectives.virtual.Run>` (a
:class:`Called`). Until the package's schedules take a channel count, a call
runs one channel; the record keeps NCCL's count.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .. import auto
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


def tuner(collective: str, transport, nbytes: int, *, itemsize: int = 4, op: str | None = None) -> str | None:
    """:func:`mycollectives.auto.add_tuner`'s hook: NCCL's choice for a rank of a virtual run."""
    from .transport import VirtualTransport

    actor = _m.current_or_none()
    if actor is None or not isinstance(transport, VirtualTransport) or transport.world_size < 2:
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
        if len(world.priced) >= 4096:
            world.priced.clear()
        called = world.priced[key] = replace(_price(topo, choice, where), gpus=transport.gpus)
    actor.state["nccl"] = called
    if transport.rank == 0 and len(world.nccl_calls) < MAX_CALLS:
        world.nccl_calls.append(called)
    return choice.schedule


def _price(topo, choice: Choice, where: tuple[int, int]) -> Called:
    nodes, local = where
    if choice.exact or not _filled(topo, nodes, local):
        return Called((), choice, 1, "flows", 0.0)
    sim = simulate_nccl(
        choice.collective, choice.algorithm, choice.nbytes, topo, protocol=choice.protocol,
        world_size=nodes * local,
    )  # fmt: skip
    return Called((), choice, 1, "NCCL's model", sim.time_s)


def link_model(base: LinkModel, called: Called | None) -> LinkModel:
    """The link model of a call: its protocol's constants, else the run's."""
    if called is None or called.choice.protocol.lower() == base.proto.name:
        return base
    return LinkModel(base.topo, called.choice.protocol.lower(), base.cap_scale)


def wire(base: LinkModel, called: Called | None) -> float:
    """Bytes a message puts on the wire per byte of data, against the run's protocol (LL: twice)."""
    model = link_model(base, called)
    return base.proto.efficiency / model.proto.efficiency


auto.add_tuner(tuner)
