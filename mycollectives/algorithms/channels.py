"""Channels: a schedule cut into ``k`` independent copies of itself, as NCCL runs a collective.

NCCL splits every collective over *channels* (``nccl_enqueue``): each channel
runs the whole algorithm, its own ring or tree, on its own part of the data,
and on a rail-optimised cluster each channel enters and leaves a node
through its own NIC. :func:`cut` does that to any schedule of the menu:

* the data: channel ``c`` gets part ``c`` of :func:`~mycollectives.schedule.split`
  of the vector (or of every rank's block, for blocked collectives), so a
  count not divisible by ``k`` gives parts that differ by one element, and a
  part of zero elements leaves its channel out;
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
    k, record = spec.channels, spec.record
    if record.split:
        raise ValueError(
            f"{spec.collective} runs its pairs as NCCL's send/recv do, on one channel: channels must be 1"
        )
    parts = split(spec.count, k)
    tmp_at, channels = 0, []
    for c in range(k):
        n_c = int(parts.counts[c])
        if n_c == 0:
            continue
        perm = permutation(spec.world_size, spec.local_size, c)
        inv = np.argsort(perm)
        sub = dataclasses.replace(spec, channels=1, count=n_c, root=int(inv[spec.root]))
        rounds = build(sub)
        moved = [_place(r, spec, sub, perm, int(parts.offsets[c]), tmp_at, c) for r in rounds]
        tmp_at += max((_tmp_end(r) for r in rounds), default=0)
        channels.append(moved)
    return in_parallel(*channels)


def _tmp_end(r: Round) -> int:
    ends = [r.soff[r.sbuf == TMP] + r.count[r.sbuf == TMP], r.doff[r.dbuf == TMP] + r.count[r.dbuf == TMP]]
    return int(max((e.max() for e in ends if len(e)), default=0))


def _place(r: Round, spec: Spec, sub: Spec, perm: np.ndarray, at: int, tmp_at: int, c: int) -> Round:
    """One round of a channel's copy moved onto the real ranks, buffers and channel ``c``."""
    blocked, m, n, p = spec.record.blocked, sub.count, spec.count, spec.world_size
    if blocked:
        owner = (np.arange(p) + sub.root) % p if spec.record.rooted else np.arange(p)
        real = perm[owner]
        slot = (real - spec.root) % p if spec.record.rooted else real
        r = _cut_at_blocks(r, m)
    src, dst, sbuf, soff, dbuf, doff, count, red = (getattr(r, k) for k in _COLS)

    def where(buf: np.ndarray, off: np.ndarray) -> np.ndarray:
        work = slot[off // m] * n + at + off % m if blocked else off + at
        return np.where(buf == WORK, work, np.where(buf == TMP, off + tmp_at, off))

    return Round(perm[src], perm[dst], sbuf, where(sbuf, soff), dbuf, where(dbuf, doff), count, red,
                 np.full(len(src), c, np.int64))  # fmt: skip


_COLS = ("src", "dst", "sbuf", "soff", "dbuf", "doff", "count", "reduce")


def _cut_at_blocks(r: Round, m: int) -> Round:
    """``r`` with every transfer cut where a block of ``m`` elements of ``WORK`` ends, on either side."""
    cols = [getattr(r, k) for k in _COLS]
    src, dst, sbuf, soff, dbuf, doff, count, red = cols
    last = count - 1
    crosses = ((sbuf == WORK) & (soff // m != (soff + last) // m)) | (
        (dbuf == WORK) & (doff // m != (doff + last) // m)
    )
    if not crosses.any():
        return r
    rows = []
    for i in range(len(src)):
        so, do, left = int(soff[i]), int(doff[i]), int(count[i])
        while left:
            step = left
            for buf, off in ((sbuf[i], so), (dbuf[i], do)):
                if buf == WORK:
                    step = min(step, m - off % m)
            rows.append((src[i], dst[i], sbuf[i], so, dbuf[i], do, step, red[i]))
            so, do, left = so + step, do + step, left - step
    out = np.array(rows, dtype=np.int64).T
    return Round(*(np.ascontiguousarray(x) for x in out[:7]), out[7].astype(bool))
