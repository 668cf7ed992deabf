"""Schedules as data: an algorithm is a sequence of rounds of transfers.

A *transfer* moves ``count`` elements from buffer ``sbuf`` at offset ``soff``
on rank ``src`` to buffer ``dbuf`` at offset ``doff`` on rank ``dst``, and
either copies them there or reduces them into what is there (``reduce``).
A transfer with ``src == dst`` is a local copy (no bytes cross a link).

A *round* is a set of transfers that may all be in flight at once. Its
meaning is that of a synchronous step: every send reads the state at the start
of the round, every receive is applied at its end. The executor keeps that
promise while still overlapping work inside a round (see ``executor.py``).

A transfer also carries its *channel* (-1 unless the schedule was cut into
channels, :mod:`mycollectives.algorithms.channels`): NCCL's channels each run
the algorithm on their own slice of the data, and a virtual run sends a
channel's transfers between nodes over its own rail.

A round stores its transfers as columns (NumPy arrays, one entry per
transfer), so that an algorithm can be written for all ranks at once, the way
a textbook draws it, and so that the simulator can handle thousands of ranks.

Buffers are named by small integers, one meaning per collective (see
``BUFFERS``): ``WORK`` is the buffer the collective computes in; ``IN`` and
``OUT`` are separate input and output buffers where a collective needs them
(all-to-all); ``TMP`` is scratch space.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

WORK, IN, OUT, TMP = 0, 1, 2, 3
BUFFERS = ("work", "in", "out", "tmp")

_COLUMNS = ("src", "dst", "sbuf", "soff", "dbuf", "doff", "count", "reduce")


@dataclass(frozen=True, eq=False)
class Round:
    """One round: parallel arrays, one entry per transfer."""

    src: np.ndarray
    dst: np.ndarray
    sbuf: np.ndarray
    soff: np.ndarray
    dbuf: np.ndarray
    doff: np.ndarray
    count: np.ndarray
    reduce: np.ndarray
    channel: np.ndarray | None = None  # None: no channel (-1), the schedule was not cut into channels

    def __post_init__(self) -> None:
        if self.channel is None:
            object.__setattr__(self, "channel", np.full(len(self.src), -1, np.int64))

    def on_channel(self, c: int) -> Round:
        """The same transfers, on channel ``c``."""
        cols = [getattr(self, k) for k in _COLUMNS]
        return Round(*cols, np.full(len(self.src), c, np.int64))

    @classmethod
    def of(
        cls,
        src,
        dst,
        off,
        count,
        *,
        reduce=False,
        doff=None,
        sbuf=WORK,
        dbuf=WORK,
    ) -> Round:
        """Build a round from scalars or arrays (broadcast against each other).

        ``off`` is the source offset; the destination offset is the same
        unless ``doff`` is given. Transfers of zero elements are dropped.
        """
        doff = off if doff is None else doff
        cols = np.broadcast_arrays(
            *(np.asarray(c, dtype=np.int64) for c in (src, dst, sbuf, off, dbuf, doff, count)),
            np.asarray(reduce, dtype=bool),
        )
        cols = [np.ravel(c) for c in cols]
        keep = cols[6] > 0
        if not keep.all():
            cols = [c[keep] for c in cols]
        return cls(*(np.ascontiguousarray(c) for c in cols))

    @classmethod
    def empty(cls) -> Round:
        return cls.of([], [], [], [])

    @classmethod
    def cat(cls, rounds: Iterable[Round]) -> Round:
        """Merge rounds that run at the same time (disjoint groups or data)."""
        rounds = [r for r in rounds if r is not None]
        if not rounds:
            return cls.empty()
        if len(rounds) == 1:
            return rounds[0]
        return cls(*(np.concatenate([getattr(r, c) for r in rounds]) for c in (*_COLUMNS, "channel")))

    def __len__(self) -> int:
        return len(self.src)

    def transfers(self) -> Iterator[tuple[int, ...]]:
        """Yield ``(src, dst, sbuf, soff, dbuf, doff, count, reduce)`` tuples."""
        cols = [getattr(self, c).tolist() for c in _COLUMNS]
        return zip(*cols)


@dataclass(frozen=True, eq=False)
class Schedule:
    """A whole algorithm: its rounds and the size of each buffer on each rank."""

    collective: str
    algorithm: str
    world_size: int
    rounds: tuple[Round, ...]
    buffers: dict[int, np.ndarray]  # buffer id -> elements on each rank (length p)
    params: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.rounds)


# --- chunks of a buffer ------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Chunks:
    """A buffer region cut into consecutive chunks: ``offsets[i]``, ``counts[i]``."""

    offsets: np.ndarray
    counts: np.ndarray

    def __len__(self) -> int:
        return len(self.offsets)

    def __getitem__(self, i):
        """Chunk ``i`` as ``(offset, count)``; ``i`` may be an array of indices."""
        return self.offsets[i], self.counts[i]

    def span(self, start, stop):
        """Offset and count of chunks ``start..stop-1`` taken together.

        ``start`` and ``stop`` may be arrays; an empty span has count 0.
        """
        start = np.asarray(start)
        stop = np.maximum(np.asarray(stop), start)
        ends = np.append(self.offsets, self.end)
        return ends[start], ends[stop] - ends[start]

    @property
    def end(self) -> int:
        return int(self.offsets[-1] + self.counts[-1]) if len(self) else 0

    def split(self, k: int) -> Chunks:
        """Cut every chunk into ``k`` pieces; piece ``j`` of chunk ``i`` is ``i*k + j``."""
        parts = [split(int(c), k, int(o)) for o, c in zip(self.offsets, self.counts)]
        return Chunks(
            np.concatenate([p.offsets for p in parts]) if parts else np.zeros(0, np.int64),
            np.concatenate([p.counts for p in parts]) if parts else np.zeros(0, np.int64),
        )


def split(n: int, k: int, start: int = 0) -> Chunks:
    """Cut ``n`` elements into ``k`` chunks whose sizes differ by at most one.

    >>> split(10, 4).counts.tolist()
    [3, 3, 2, 2]
    """
    i = np.arange(k, dtype=np.int64)
    counts = n // k + (i < n % k)
    offsets = start + np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    return Chunks(offsets, counts.astype(np.int64))


def num_segments(count: int, segment: int | None) -> int:
    """How many pipeline segments a region of ``count`` elements is cut into."""
    if not segment or segment <= 0 or count <= segment:
        return 1
    return -(-count // segment)


# --- composing schedules -----------------------------------------------------


def in_parallel(*phases: Sequence[Round]) -> list[Round]:
    """Run several round sequences side by side: round i of each, merged."""
    phases = [list(p) for p in phases]
    depth = max((len(p) for p in phases), default=0)
    return [Round.cat(p[i] for p in phases if i < len(p)) for i in range(depth)]


def relabel(rounds: Iterable[Round], ranks: Sequence[int]) -> list[Round]:
    """Map virtual ranks ``0..k-1`` of a sub-schedule onto real ``ranks``."""
    table = np.asarray(ranks, dtype=np.int64)
    out = []
    for r in rounds:
        out.append(
            Round(table[r.src], table[r.dst], r.sbuf, r.soff, r.dbuf, r.doff, r.count, r.reduce, r.channel)
        )
    return out


def floor_pow2(p: int) -> int:
    """Largest power of two not above ``p`` (``p >= 1``)."""
    return 1 << (p.bit_length() - 1)


def ceil_log2(p: int) -> int:
    return (p - 1).bit_length()


def mirror(rounds: Sequence[Round], reduce: bool = True) -> list[Round]:
    """Run a schedule backwards: each transfer reversed, in reverse round order.

    The mirror of a broadcast tree is a reduction tree (``reduce=True``); the
    mirror of a scatter is a gather (``reduce=False``).
    """
    return [
        Round(r.dst, r.src, r.dbuf, r.doff, r.sbuf, r.soff, r.count, np.full(len(r), reduce), r.channel)
        for r in reversed(rounds)
    ]
