"""A virtual GPU cluster: the package's code, and a learner's, on a modelled node or cluster in virtual time.

>>> import torch, mycollectives as mc
>>> from mycollectives import virtual
>>> def step(rank):
...     t0 = virtual.clock()                # this rank's virtual time, seconds
...     x = torch.ones(1 << 18)              # 1 MiB of float32
...     mc.all_reduce(x)                     # priced on the cluster's links
...     virtual.compute(seconds=1e-3)        # or flops=..., bytes=...: charged to this rank's GPU
...     return x[0].item(), virtual.clock() - t0
>>> run = virtual.run(step, cluster="dgx_h100", nodes=2)   # 16 ranks
>>> run.results[0][0], len(run.results)
(16.0, 16)
>>> 1e-3 < run.elapsed < 2e-3
True

Every rank is a thread running ``fn(rank, *args)`` with real tensors; a
scheduler runs one at a time in virtual time (SimGrid's maestro, SMPI's way
of running MPI programs; :mod:`.maestro`). Messages are flows on the
topology's links from the moment they are posted, each priced by its own
route with the round simulator's own link model, with no barrier between
rounds (:mod:`.network`, :mod:`.transport`), and so are the loads of
symmetric memory (:mod:`.heap`); a collective runs on NCCL's number of
channels unless given ``channels=`` (:mod:`.channels`), each channel between
nodes on its own rail; torch ops are charged at the rates measured GPUs reach
(:mod:`.rates`, :mod:`.compute`), and so are the reductions inside
collectives, as memory-bound kernels;
``async_op=True`` collectives run on a communication stream beside the rank
(:mod:`.streams`). A collective called without ``algorithm=`` runs what
NCCL 2.30.7 would (algorithm, protocol, channels: :mod:`.tuning`), and
``Run.calls`` records each choice. Inside a run, collectives with
``group=None`` use the run's world; ``transport.subgroup(ranks)`` gives a
smaller group, and ``torch.distributed.init_process_group`` joins the run's
world (:mod:`mycollectives.torchpg.ondemand`). ``Run.table()`` gives each
rank's virtual time, compute, exposed communication and bytes by link class;
``Run.trace(path)`` writes a Chrome trace / Perfetto timeline (:mod:`.trace`).
Introduced in the book's chapter "The virtual cluster".

A training script written for ``torchrun`` runs unmodified with the launcher
(:mod:`.launch`; its ranks get a virtual CUDA device each, :mod:`.cuda`)::

    python -m mycollectives.virtual --nnodes 2 --nproc-per-node 8 train.py   # or: vtorchrun ...

``run`` arguments:

* ``cluster``: a node kind (``dgx_a100``, ``dgx_h100``, ``dgx_h200``,
  ``dgx_b200``, ``gb200_nvl72``) with ``nodes`` and any keyword of
  :func:`mycollectives.topology.cluster` (``nics_per_node``, ``nic``,
  ``fabric``, ``oversubscription``, ...), another preset name, or a
  :class:`~mycollectives.topology.Topology`.
* ``slow={rank: factor}``: that rank's compute takes ``factor`` times longer (a straggler).
* ``compute="achieved"`` (default): GEMMs at measured efficiency by shape, HBM at a measured
  fraction, a floor per kernel (:mod:`.rates`); ``"roofline"``: the datasheet's bound;
  or a ``Rates(gemm=..., hbm=..., floor=...)``, each efficiency in (0, 1].
* ``degrade={link: factor}`` or ``{(u, v): factor}``: links run ``factor``
  times slower: a link index, or the cable between vertices ``u`` and ``v``
  (indices or names such as ``(3, "n0.nvswitch")`` or ``("n1.nic0", "leaf0")``),
  both directions; two GPUs without a cable between them (``(0, 1)``) slow every
  link of the path between them. ``Topology.slowed(gpu, factor)`` slows one GPU's NVLink.
* ``protocol``: NCCL's protocol whose constants price the links (``simple``, ``ll128``, ``ll``) for
  calls that name their algorithm; a call left to NCCL's choice is priced at the protocol NCCL picks.
* ``world_size``: use the first GPUs only; ``timeout``: wall-clock seconds before giving up
  (default ``MYCOLLECTIVES_VIRTUAL_TIMEOUT``, else 900): a rank that never hands control back
  (an endless loop, a wait outside the package) is then named.
* ``data=False``: data-free (:mod:`mycollectives.datafree`): ranks pass meta tensors
  (``torch.empty(n, device="meta")``), which need no memory; no bytes move, and the same
  messages are priced, so the virtual times are those of a run with data.
* ``setup=[hook, ...]``: each ``hook(rank, world_size)`` runs in the rank's thread before
  ``fn`` and may return a context manager, held around ``fn``; ``dist=True`` adds
  ``mycollectives.torchpg``'s hook (torch.distributed inside the run).
"""

from __future__ import annotations

import math

from .. import timing as _timing
from ..algorithms import channels as _channels
from ..cliargs import finite
from . import maestro as _m
from .channels import nccl_channels
from .compute import GPU_ROOFLINES, paused, roofline_of
from .rates import KERNEL_FLOOR, NETWORK_ONLY, ROOFLINE, Rates
from .runner import Run, degraded, run, topology_of
from .validate import agreement, engines

__all__ = [
    "run",
    "Run",
    "clock",
    "compute",
    "transport",
    "roofline_of",
    "Rates",
    "ROOFLINE",
    "NETWORK_ONLY",
    "topology_of",
    "degraded",
    "agreement",
    "engines",
    "GPU_ROOFLINES",
    "KERNEL_FLOOR",
    "paused",
]


def clock() -> float:
    """This rank's virtual time, in seconds since the run started."""
    return _m.current().clock


def transport():
    """This rank's transport for the run's world (what ``group=None`` means inside a run)."""
    from ..transport.local import current_local

    _m.current()
    return current_local()


def compute(seconds: float | None = None, *, flops: float | None = None, bytes: float | None = None) -> float:
    """Charge this rank's GPU: ``seconds`` of work, or ``flops`` and/or ``bytes`` at its rates
    (``max(flops / (peak x gemm), bytes / (bandwidth x hbm))``, the tensor-core peak at the run's
    ``compute=`` rates: achieved by default, the roofline with ``compute="roofline"``; say
    ``seconds`` for other work); a straggler's (``slow=``) takes longer. Returns the seconds charged."""
    actor = _m.current()
    given = {k: v for k, v in (("seconds", seconds), ("flops", flops), ("bytes", bytes)) if v is not None}
    for k, v in given.items():
        finite(v, k, least=0, where=f"virtual.compute on rank {actor.rank}")
    if not given or ("seconds" in given and len(given) > 1):
        raise ValueError(f"virtual.compute on rank {actor.rank}: give seconds=, or flops= and/or bytes=")
    charge = actor.state["charge"]
    if "seconds" in given:
        t = float(seconds)
    else:
        t = max((flops or 0) / (charge.roof.peak_flops * charge.rates.gemm),
                (bytes or 0) / (charge.roof.bandwidth * charge.rates.hbm))  # fmt: skip
    before = actor.clock
    if not math.isfinite(before + t * charge.slow):
        raise ValueError(
            f"virtual.compute on rank {actor.rank}: {t:g} s of work (times its slowness, {charge.slow:g}) "
            "takes its clock past any finite time"
        )
    charge.charge(t)
    return actor.clock - before


def _rank_clock() -> float | None:
    """This thread's virtual clock, if it is a rank of a virtual run (for :mod:`mycollectives.timing`)."""
    actor = _m.current_or_none()
    return None if actor is None else actor.clock


_timing.add_clock(_rank_clock)
_channels.add_default(nccl_channels)  # inside a run, a call without channels= gets NCCL's count
