"""Channels: a schedule cut into ``k`` independent copies of itself, as NCCL runs a collective.

NCCL splits every collective over *channels* (``nccl_enqueue``): each channel
runs the whole algorithm, its own ring or tree, on its own part of the data,
and on a rail-optimised cluster each channel enters and leaves a node
through its own NIC. :func:`cut` does that to any schedule of the menu:

* the data: channel ``c`` gets part ``c`` of :func:`~mycollectives.schedule.split`
  of each of ``p`` chunks of the vector (so that a ring's chunk, cut into ``k``
  parts, still lies in one place and travels as one piece when the channels'
  peers coincide, ``plan.py``), or, for an algorithm whose transfers do not keep
  to those chunks (a tree's segments), part ``c`` of the whole vector, or of
  every rank's block for blocked collectives; a count not divisible by ``k``
  gives parts that differ by one element, and a channel with no elements is
  left out;
* the ranks: on more than one node (``Spec.local_size`` ranks per node)
  channel ``c``'s copy is laid on the ranks rotated by ``c`` inside every
  node, so a ring's hop between nodes leaves each node from local rank
  ``c - 1`` and enters the next one at local rank ``c``: the GPU of NIC ``c``
  on a DGX, where each GPU has its NIC (``sim/channels.py`` draws NCCL's rings
  so, after ``nccl_connect``);
* the channel of every transfer is a column of the schedule
  (``Round.channel``): a virtual run routes a transfer between nodes on
  channel ``c`` over rail ``c`` (``Topology.route``).

Each channel's copy is the algorithm's own schedule for a smaller call, so
:func:`mycollectives.verify.verify` proves the result for every ``p`` and
``k`` as it proves any schedule. The channels of a round run side by side
(``in_parallel``): a rank's round still ends when all of its own messages
are in, whatever channel they belong to.

How many channels a call gets when its caller does not say: 1, unless a
resolver added with :func:`add_default` knows better (a virtual run gives
NCCL's count, ``mycollectives.virtual``).
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Callable

import numpy as np

from ..collectives import Spec
from ..schedule import TMP, WORK, Round, in_parallel, split

_DEFAULTS: list[Callable] = []


def add_default(resolver: Callable) -> None:
    """``resolver(collective, nbytes, transport)`` gives a call's channel count, or None to pass."""
    _DEFAULTS.append(resolver)


def default(collective: str, nbytes: int, transport) -> int:
    """The channels of a call whose caller gave none: the first resolver's answer, else 1."""
    for resolver in _DEFAULTS:
        k = resolver(collective, nbytes, transport)
        if k is not None:
            return int(k)
    return 1


def check(value, where: str = "channels") -> int:
    """``value`` as a channel count: a positive int, else a ValueError naming ``channels``."""
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{where}: argument 'channels' must be a positive int, got {value!r}")
    return int(value)


def permutation(p: int, local: int | None, c: int) -> np.ndarray:
    """The real rank of each of channel ``c``'s ranks: rotated by ``c`` inside each node of ``local``
    ranks when there is more than one node, else as they are."""
    v = np.arange(p, dtype=np.int64)
    if not local or local >= p or p % local:
        return v
    return v // local * local + (v % local + c) % local


def cut(spec: Spec, build: Callable[[Spec], list[Round]]) -> list[Round]:
    """The rounds of ``spec.channels`` channels, each channel's built by ``build`` (see the module)."""
    k, record, p, n = spec.channels, spec.record, spec.world_size, spec.count
    if record.split:
        raise ValueError(
            f"{spec.collective} runs its pairs as NCCL's send/recv do, on one channel: channels must be 1"
        )
    parts = split(n, k)
    if record.blocked:  # part c of every rank's block
        return _laid(spec, build, np.tile(parts.counts, (p, 1)), np.tile(parts.offsets, (p, 1)))
    chunks = split(
        n, p
    )  # part c of each of p chunks of the vector, so that a ring's chunk stays in one place
    cut_up = [split(int(size), k, int(at)) for at, size in zip(chunks.offsets, chunks.counts)]
    sizes = np.array([x.counts for x in cut_up]).reshape(p, k)
    starts = np.array([x.offsets for x in cut_up]).reshape(p, k)
    rounds = _laid(spec, build, sizes, starts, chunked=True)
    if rounds is not None:
        return rounds
    sizes = np.zeros((p, k), np.int64)  # an algorithm that does not work in p chunks (a tree, recursive
    sizes[0] = parts.counts  # doubling): channel c takes part c of the vector, in one piece
    return _laid(spec, build, sizes, np.tile(parts.offsets, (p, 1)))


def _laid(spec: Spec, build, sizes: np.ndarray, starts: np.ndarray, chunked: bool = False):
    """The channels' rounds, channel ``c``'s data in pieces ``sizes[:, c]`` at ``starts[:, c]``; with
    ``chunked``, None where the first channel's transfers cross its pieces (it works in other units)."""
    k, p, tmp_at, channels = spec.channels, spec.world_size, 0, []
    for c in range(k):
        n_c = int(sizes[0, c]) if spec.record.blocked else int(sizes[:, c].sum())
        if n_c == 0:
            continue
        perm = permutation(p, spec.local_size, c)
        sub = dataclasses.replace(spec, channels=1, count=n_c, root=int(np.argsort(perm)[spec.root]))
        rounds = build(sub)
        layout = _layout(spec, sub, perm, sizes[:, c], starts[:, c])
        if chunked and not channels and any(_crosses(r, layout[0]).any() for r in rounds):
            return None
        channels.append([_place(r, layout, tmp_at, perm, c) for r in rounds])
        tmp_at += max((_tmp_end(r) for r in rounds), default=0)
    return in_parallel(*channels)


def _layout(spec: Spec, sub: Spec, perm: np.ndarray, sizes: np.ndarray, starts: np.ndarray):
    """Where a channel's ``WORK`` lies in the real one: its pieces' first elements in its own buffer
    (``cum``, with the end) and in the real buffer (``base``)."""
    p, m = spec.world_size, sub.count
    if not spec.record.blocked:
        return np.concatenate([[0], np.cumsum(sizes)]), starts
    owner = (np.arange(p) + sub.root) % p if spec.record.rooted else np.arange(p)
    real = perm[owner]
    slot = (real - spec.root) % p if spec.record.rooted else real
    return np.arange(p + 1) * m, slot * spec.count + starts[0]


def _tmp_end(r: Round) -> int:
    ends = [r.soff[r.sbuf == TMP] + r.count[r.sbuf == TMP], r.doff[r.dbuf == TMP] + r.count[r.dbuf == TMP]]
    return int(max((e.max() for e in ends if len(e)), default=0))


_COLS = ("src", "dst", "sbuf", "soff", "dbuf", "doff", "count", "reduce")


def _place(r: Round, layout, tmp_at: int, perm: np.ndarray, c: int) -> Round:
    """One round of a channel's copy moved onto the real ranks, buffers and channel ``c``."""
    cum, base = layout
    r = _cut_at(r, cum)
    src, dst, sbuf, soff, dbuf, doff, count, red = (getattr(r, k) for k in _COLS)

    def where(buf: np.ndarray, off: np.ndarray) -> np.ndarray:
        i = np.clip(np.searchsorted(cum, off, "right") - 1, 0, len(base) - 1)
        return np.where(buf == WORK, base[i] + off - cum[i], np.where(buf == TMP, off + tmp_at, off))

    return Round(perm[src], perm[dst], sbuf, where(sbuf, soff), dbuf, where(dbuf, doff), count, red,
                 np.full(len(src), c, np.int64))  # fmt: skip


def _crosses(r: Round, cum: np.ndarray) -> np.ndarray:
    """Which transfers of ``r`` cross the end of a piece of the channel's ``WORK`` (``cum``), on either side."""

    def across(buf, off):
        return (buf == WORK) & (
            np.searchsorted(cum, off, "right") != np.searchsorted(cum, off + r.count - 1, "right")
        )

    return across(r.sbuf, r.soff) | across(r.dbuf, r.doff)


def _cut_at(r: Round, cum: np.ndarray) -> Round:
    """``r`` with every transfer cut where a piece of the channel's ``WORK`` ends (``cum``), on either side."""
    if not _crosses(r, cum).any():
        return r
    src, dst, sbuf, soff, dbuf, doff, count, red = (getattr(r, k) for k in _COLS)

    def piece(off):
        return np.searchsorted(cum, off, "right")

    rows = []
    for i in range(len(src)):
        so, do, left = int(soff[i]), int(doff[i]), int(count[i])
        while left:
            step = left
            for buf, off in ((sbuf[i], so), (dbuf[i], do)):
                if buf == WORK:
                    step = min(step, int(cum[piece(off)]) - off)
            rows.append((src[i], dst[i], sbuf[i], so, dbuf[i], do, step, red[i]))
            so, do, left = so + step, do + step, left - step
    out = np.array(rows, dtype=np.int64).T
    return Round(*(np.ascontiguousarray(x) for x in out[:7]), out[7].astype(bool))
