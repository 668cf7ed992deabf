"""What the model charges the schedule behind a measured point.

Chapter 3's model (:func:`~mycollectives.cost.counted_cost`) charges each
round at its busiest rank: ``alpha`` per message, ``beta`` per byte,
``gamma`` per reduced byte, on full-duplex links with a core per rank.
:class:`Conditions` says how a real group differs from that (CPU ranks that
do both directions' work, fewer cores than ranks, a transport that cuts
messages or has two ways of sending them), and :func:`features` counts a
point's ``(messages, bytes, reduced bytes)`` under them, so that the time is
their dot product with the machine's parameters (:func:`params`); the fit in
:mod:`mycollectives.bench.model` solves for those parameters.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import auto
from ..algorithms import build
from ..cost import Machine, counted_cost, round_load, spec_for
from .factors import DTYPES
from .runner import Result


@dataclass(frozen=True)
class CpuMachine(Machine):
    """A machine with the parameters that :class:`Conditions` can add to
    alpha, beta and gamma (each used only under the condition that asks for
    it): ``alpha_large``, the fixed cost of a message of ``eager_bytes`` or
    more; ``latency``, a round's wait on its critical path; ``beta_mem`` and
    ``gamma_mem``, beta and gamma once the buffers no longer fit the cache."""

    alpha_large: float = 0.0
    latency: float = 0.0
    beta_mem: float = 0.0
    gamma_mem: float = 0.0


@dataclass(frozen=True)
class Conditions:
    """How the model charges a round, beyond alpha, beta and gamma.

    The defaults are chapter 3's textbook model (:func:`counted_cost`): full
    duplex links, a core per rank, messages never cut, one way to send.

    * ``duplex=False`` charges a rank for what it sends *and* what it
      receives, messages and bytes alike: on CPUs both directions are work of
      the same cores (memory copies, and for every message a post, a wait
      and a wake-up), so nothing overlaps. For messages this is LogP's
      overhead ``o``, paid by the sender and again by the receiver
      (``culler1993logp``).
    * ``cores``: when the ranks share fewer cores than there are ranks (local
      gloo processes on a small machine), a round also lasts at least its
      total work divided by the cores, since every byte is copied by one of
      them; the round is charged the larger of the two.
    * ``segment_bytes``: the transport's cap on one message (gloo's
      ``max_message_bytes``); each cut segment costs its own alpha.
    * ``eager_bytes``: the transport sends a message of this many bytes or
      more another way, with a fixed cost of its own (the shared-memory
      transport with ``eager_bytes`` raised: a token through a doorbell and
      the bytes through ``/dev/shm``; smaller messages go through the group
      whole). Such messages are counted apart and charged
      :attr:`CpuMachine.alpha_large`, as NCCL's tuner gives each of its
      protocols a latency of its own. An ``eager_bytes`` of 1 or less (the
      transport's default) is one way for every message: no second alpha.
    * ``latency``: every round with a message in it also costs
      :attr:`CpuMachine.latency` once. ``alpha`` is LogP's overhead ``o``,
      work a rank does per message; ``latency`` is LogP's ``L``, the time
      from a send to its receiver running, which the ranks of one round wait
      out side by side, not one after another (``culler1993logp``). A
      schedule of many rounds pays it many times, one of few rounds with
      many messages each pays it few times.
    * ``cache_bytes``: the last-level cache. Once the ranks' buffers
      together (``world_size * size`` bytes) no longer fit it, every byte is
      moved and reduced at the speed of main memory: the call is charged
      :attr:`CpuMachine.beta_mem` and :attr:`CpuMachine.gamma_mem` instead
      of ``beta`` and ``gamma`` (chapter 1's memory hierarchy, on a CPU).
    """

    duplex: bool = True
    cores: int | None = None
    segment_bytes: int | None = None
    eager_bytes: int | None = None
    latency: bool = False
    cache_bytes: int | None = None

    @classmethod
    def from_meta(cls, meta: dict) -> Conditions:
        """The conditions of a recorded sweep, from its ``meta``. CPU
        processes (gloo): no full duplex, the machine's cores, the
        transport's message cap and its eager limit (shared memory). GPUs
        (NCCL): the textbook's, since each GPU has its own engines and its
        links are full duplex."""
        if meta.get("backend") == "nccl":
            return cls()
        eager = meta.get("eager_bytes")
        if eager is None and meta.get("transport") == "shm":
            eager = 64 << 10  # recorded before the bench wrote it down: the default then
        if eager is not None and eager <= 1:
            eager = None  # every message goes one way (the doorbells' shared memory)
        return cls(
            duplex=False,
            cores=meta.get("cores"),
            segment_bytes=meta.get("max_message_bytes"),
            eager_bytes=eager,
            latency=True,
            cache_bytes=meta.get("llc_bytes"),
        )


TEXTBOOK = Conditions()


def _names(cond: Conditions) -> list[str]:
    """The machine's parameters that ``cond`` charges, in the order of :func:`features`' counts."""
    return [
        "alpha",
        *(["alpha_large"] if cond.eager_bytes is not None else []),
        *(["latency"] if cond.latency else []),
        "beta",
        "gamma",
        *(["beta_mem", "gamma_mem"] if cond.cache_bytes is not None else []),
    ]


_STAND_IN = {"alpha_large": "alpha", "latency": None, "beta_mem": "beta", "gamma_mem": "gamma"}


def params(machine: Machine, cond: Conditions = TEXTBOOK) -> np.ndarray:
    """The machine's parameters in the order of :func:`features`' counts. A
    plain :class:`Machine` (a ping-pong calibration) has no latency and one
    speed for every message and byte: its alpha, beta and gamma stand in."""

    def value(name: str) -> float:
        if isinstance(machine, CpuMachine) or name not in _STAND_IN:
            return getattr(machine, name)
        return getattr(machine, _STAND_IN[name]) if _STAND_IN[name] else 0.0

    return np.array([value(n) for n in _names(cond)])


def machine_of(values, cond: Conditions = TEXTBOOK) -> Machine:
    """The inverse of :func:`params`."""
    named = dict(zip(_names(cond), (float(x) for x in values)))
    if len(named) == 3:
        return Machine(**named)
    return CpuMachine(**named)


def schedule_of(r: Result, machine: Machine | None = None):
    """The schedule a result ran (``auto`` resolved as the API resolves it)."""
    item = _itemsize(r.type)
    nbytes = _block_bytes(r)
    name = auto.choose(r.collective, r.world_size, nbytes) if r.algorithm == "auto" else r.algorithm
    spec = spec_for(r.collective, r.world_size, nbytes, item)
    if name in ("chain", "double_binary_tree"):  # the API's default segment
        from ..api.core import DEFAULT_SEGMENT_BYTES

        spec = spec_for(r.collective, r.world_size, nbytes, item, segment=DEFAULT_SEGMENT_BYTES // item)
    return build(spec, name)


def _itemsize(type_name: str) -> int:
    import torch

    return torch.empty(0, dtype=DTYPES.get(type_name, torch.float32)).element_size()


def _block_bytes(r: Result) -> int:
    """The bytes :func:`spec_for` expects: one rank's block where the collective splits."""
    if r.collective in ("all_gather", "reduce_scatter", "scatter", "gather"):
        return r.size // r.world_size
    return r.size


def _loads(rnd, p: int, item: int, cond: Conditions) -> np.ndarray:
    """Per rank counts of one round: ``(messages, bytes, reduced bytes)``, or
    ``(small messages, large messages, bytes, reduced bytes)`` under an
    ``eager_bytes`` limit. On a full-duplex link a rank's sends and receives
    overlap, so the larger side counts; otherwise both sides are summed.

    A reduced transfer longer than ``segment_bytes`` travels as several
    messages, each costing its ``alpha``.
    """
    if cond.duplex and not cond.segment_bytes and cond.eager_bytes is None:
        load = round_load(rnd, p, item)
        return np.stack([load.messages, load.nbytes, load.reduced], axis=1)
    remote = rnd.src != rnd.dst
    src, dst, nb = rnd.src[remote], rnd.dst[remote], rnd.count[remote] * item
    pair, inv = np.unique(src * p + dst, return_inverse=True)
    pair_bytes = np.bincount(inv, weights=nb, minlength=len(pair))
    pair_reduces = np.bincount(inv, weights=rnd.reduce[remote], minlength=len(pair)) > 0
    per_pair = np.ones(len(pair))
    if cond.segment_bytes:
        cut = pair_reduces & (pair_bytes > cond.segment_bytes)
        per_pair[cut] = np.ceil(pair_bytes[cut] / cond.segment_bytes)
    both = np.maximum if cond.duplex else np.add

    def count(weights):  # at the sender and at the receiver
        return both(
            np.bincount(pair // p, weights=weights, minlength=p),
            np.bincount(pair % p, weights=weights, minlength=p),
        )

    if cond.eager_bytes is None:
        msgs = [count(per_pair)]
    else:
        large = pair_bytes / per_pair >= cond.eager_bytes
        msgs = [count(per_pair * ~large), count(per_pair * large)]
    moved = both(np.bincount(src, weights=nb, minlength=p), np.bincount(dst, weights=nb, minlength=p))
    red = np.bincount(dst, weights=nb * rnd.reduce[remote], minlength=p)
    return np.stack([*msgs, moved, red], axis=1)


def features(r: Result, machine: Machine, cond: Conditions = TEXTBOOK) -> np.ndarray:
    """The counts of :func:`_loads` summed over rounds, each round counted at
    its busiest rank under ``machine`` (as :func:`counted_cost` does), or at
    the shared cores (see :class:`Conditions`); then, as ``cond`` asks, the
    rounds that carry a message (``latency``), and the bytes moved to the
    columns of main memory when the ranks' buffers outgrow the cache."""
    s = schedule_of(r)
    item = _itemsize(r.type)
    names = _names(cond)
    weights = params(machine, cond)
    out = cond.cache_bytes is not None and s.world_size * r.size >= cond.cache_bytes

    def filled(name: str) -> bool:  # the columns a round's loads fill (in cache or out, not both)
        if name == "latency":
            return False
        return name.startswith("alpha") or cond.cache_bytes is None or name.endswith("_mem") == out

    use = [i for i, n in enumerate(names) if filled(n)]
    total = np.zeros(len(names))
    shared = cond.cores is not None and cond.cores < s.world_size
    for rnd in s.rounds:
        f = _loads(rnd, s.world_size, item, cond)
        if not f.any():
            continue  # nothing leaves a rank: no wait
        if shared:
            f = np.vstack([f, f.sum(axis=0) / cond.cores])
        total[use] += f[int(np.argmax(f @ weights[use]))]
        if cond.latency:
            total[names.index("latency")] += 1
    return total


def predict_us(r: Result, machine: Machine, cond: Conditions = TEXTBOOK) -> float:
    """The model's time of the schedule behind ``r``, in microseconds (under
    the textbook conditions, chapter 3's :func:`~mycollectives.cost.counted_cost`)."""
    if cond == TEXTBOOK:
        return counted_cost(schedule_of(r), machine, _itemsize(r.type)) * 1e6
    return float(features(r, machine, cond) @ params(machine, cond)) * 1e6


def describe(machine: Machine, cond: Conditions = TEXTBOOK) -> str:
    """The parameters ``cond`` charges, in readable units."""
    units = {"alpha": (1e6, "us"), "alpha_large": (1e6, "us"), "latency": (1e6, "us")}
    parts = []
    for name, v in zip(_names(cond), params(machine, cond)):
        scale, unit = units.get(name, (1e9, "ns/B"))
        label = f"alpha (messages of {cond.eager_bytes} B and up)" if name == "alpha_large" else name
        parts.append(f"{label} {v * scale:.{1 if unit == 'us' else 4}f} {unit}")
    return ", ".join(parts)
