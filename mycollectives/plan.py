"""A rank's view of a schedule: what it sends, receives and copies, per round.

A :class:`~mycollectives.schedule.Schedule` lists every transfer of every
rank. The executor needs one rank's share of each round, grouped by peer
(several pieces for one peer travel as one message), together with what
that rank reads during the round, which decides whether a receive may land
straight in place. :func:`plan` computes that once per (schedule, rank) and
caches it. :class:`Blocks` lets a buffer be a list of the caller's tensors
instead of one flat tensor; :func:`cut` splits a plan's pieces where those
tensors end.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
from dataclasses import dataclass

import numpy as np
import torch

from .schedule import Schedule

Piece = tuple[int, int, int, bool]  # (buffer, offset, count, reduce)
_COLUMNS = ("src", "dst", "sbuf", "soff", "dbuf", "doff", "count", "reduce", "channel")


@dataclass
class RoundPlan:
    sends: list[tuple[int, list[Piece]]]  # (peer, pieces) per message
    recvs: list[tuple[int, list[Piece]]]
    local: list[tuple[int, int, int, int, int, bool]]  # (sbuf, soff, dbuf, doff, count, reduce)
    reads: list[tuple[int, int, int]]  # (buffer, offset, count) this rank reads this round
    index: int
    channels: list[int] = dataclasses.field(
        default_factory=list
    )  # per send: its pieces' channel, -1 if mixed
    modes: list[str] = dataclasses.field(default_factory=list)  # per receive: where it lands (modes())

    def __post_init__(self) -> None:
        if not self.modes:
            self.modes = modes(self.recvs, self.reads)


@functools.lru_cache(maxsize=256)
def strands(schedule: Schedule) -> tuple[tuple[int, ...], ...]:
    """The schedule's channels grouped into *strands*, each a set of channels whose rounds join the
    same pairs of ranks (on one node, every channel of a ring; between nodes, each channel's ring
    enters a node elsewhere, so each is its own). A strand's rounds can run at their own pace, as
    NCCL's channels do; the channels of one strand would keep in step anyway, and travel together.
    One strand, ``((-1,),)``, where the schedule was not cut into channels."""
    chans = np.unique(np.concatenate([r.channel for r in schedule.rounds])) if schedule.rounds else []
    if len(chans) < 2 or chans[0] < 0:
        return ((-1,),)
    p, k = schedule.world_size, int(chans[-1]) + 1
    sig = np.zeros((len(schedule.rounds), 2, k))  # per round, a 52-bit hash of each channel's pairs
    for i, r in enumerate(schedule.rounds):
        h = _mix((r.src * p + r.dst).astype(np.uint64))
        sig[i, 0] = np.bincount(r.channel, weights=(h >> np.uint64(38)).astype(np.float64), minlength=k)
        sig[i, 1] = np.bincount(r.channel, weights=(h & np.uint64(0x3FFFFFF)).astype(np.float64), minlength=k)
    groups: dict[bytes, list[int]] = {}
    for c in chans.tolist():
        groups.setdefault(sig[:, :, c].tobytes(), []).append(c)
    return tuple(tuple(g) for g in groups.values())


def _mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser (Steele et al. 2014): each value to 64 well-mixed bits."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


@functools.lru_cache(maxsize=1024)
def plan(schedule: Schedule, rank: int, strand: tuple[int, ...] = (-1,)) -> tuple[RoundPlan, ...]:
    """This rank's view of the schedule: what to send, receive and copy, per round; given one of
    :func:`strands`, only that strand's transfers (``(-1,)``: all of them)."""
    out, rails = [], schedule.params.get("local_size") or 1 << 30  # channels c and c + local share a rail
    everything = strand == (-1,)
    for i, (rnd, (by_src, src_at, by_dst, dst_at)) in enumerate(zip(schedule.rounds, _index(schedule))):
        mine = np.concatenate(
            [by_src[src_at[rank] : src_at[rank + 1]], by_dst[dst_at[rank] : dst_at[rank + 1]]]
        )
        if not everything and len(mine):
            ch = rnd.channel[mine]
            keep = ch == strand[0]  # np.isin's answer, without its fixed cost (a strand has a few channels)
            for c in strand[1:]:
                keep |= ch == c
            mine = mine[keep]
        if not len(mine):
            continue
        sends: dict[int, list[Piece]] = {}
        recvs: dict[int, list[Piece]] = {}
        local, reads, channel, tails = [], [], {}, {}
        mine = mine[_message_order(rnd, mine, rank)]
        for src, dst, sbuf, soff, dbuf, doff, count, red, ch in zip(
            *(getattr(rnd, c)[mine].tolist() for c in _COLUMNS)
        ):
            if src == rank and dst == rank:
                local.append((sbuf, soff, dbuf, doff, count, red))
                reads.append((sbuf, soff, count))
            elif src == rank:
                _add(
                    sends, tails, ("s", dst), (sbuf, soff, count, red), (dbuf, doff)
                )  # red: the receiver reduces
                reads.append((sbuf, soff, count))
                channel[dst] = ch if channel.get(dst, ch) % rails == ch % rails else -1
            elif dst == rank:
                _add(recvs, tails, ("r", src), (dbuf, doff, count, red), (sbuf, soff))
        if sends or recvs or local:
            out.append(
                RoundPlan(
                    list(sends.items()), list(recvs.items()), local, reads, i, [channel[d] for d in sends]
                )
            )
    return tuple(out)


@functools.lru_cache(maxsize=8)
def _index(schedule: Schedule) -> tuple:
    """Per round, its transfers by rank: ``(by_src, src_at, by_dst, dst_at)``, rank ``r``'s rows
    ``by_src[src_at[r]:src_at[r + 1]]`` where it sends (or copies), and the same where it receives from
    another rank, in the round's order: each rank's plan then reads its own rows only."""
    ranks, out = np.arange(schedule.world_size + 1), []
    for r in schedule.rounds:
        by_src = np.argsort(r.src, kind="stable")
        remote = np.flatnonzero(r.src != r.dst)
        by_dst = remote[np.argsort(r.dst[remote], kind="stable")]
        out.append(
            (by_src, np.searchsorted(r.src[by_src], ranks), by_dst, np.searchsorted(r.dst[by_dst], ranks))
        )
    return tuple(out)


def _message_order(rnd, mine: np.ndarray, rank: int) -> np.ndarray:
    """This rank's transfers of a round (rows ``mine``) in the order it handles them: local copies as
    given, then each message's pieces by where they land (``dbuf``, ``doff``), which sender and receiver
    both know, so that both cut a message alike and the parts of one chunk, next to each other there,
    travel as one piece (channels cut every chunk into parts)."""
    src, dst = rnd.src[mine], rnd.dst[mine]
    kind = np.where(src == dst, 0, np.where(src == rank, 1, 2))
    peer = np.where(kind == 1, dst, np.where(kind == 2, src, 0))
    at = np.where(kind == 0, mine, rnd.doff[mine])
    return np.lexsort((at, np.where(kind == 0, 0, rnd.dbuf[mine]), peer, kind))


def modes(recvs: list[tuple[int, list[Piece]]], reads: list[tuple[int, int, int]]) -> list[str]:
    """Where each receive lands: ``direct`` (one piece, copied onto data nobody reads this round: in
    place), ``late`` (onto data this rank still sends this round: staged, applied at the round's end)
    or ``now`` (staged, applied on arrival)."""
    spans: dict[int, tuple[list[int], list[int]]] = {}
    for buf, off, count in sorted(reads):
        starts, ends = spans.setdefault(buf, ([], []))
        if ends and off <= ends[-1]:
            ends[-1] = max(ends[-1], off + count)
        else:
            starts.append(off)
            ends.append(off + count)

    def read(piece: Piece) -> bool:
        buf, off, count, _ = piece
        starts, ends = spans.get(buf, ((), ()))
        i = bisect.bisect_left(starts, off + count) - 1
        return i >= 0 and ends[i] > off

    out = []
    for _, pieces in recvs:
        hit = any(read(p) for p in pieces)
        out.append("late" if hit else "direct" if len(pieces) == 1 and not pieces[0][3] else "now")
    return out


def _add(msgs: dict, tails: dict, key: tuple, piece: Piece, far: tuple[int, int]) -> None:
    """Add ``piece`` to the message for ``key[1]``, extending its last piece where the transfer continues
    it at both ends (here and at the peer, ``far``): both ranks then cut the message alike. Channels
    cut a ring's chunk into adjacent parts, which travel as one piece again."""
    buf, off, count, red = piece
    pieces = msgs.setdefault(key[1], [])
    if tails.get(key) == (buf, off, red, *far):
        b, o, c, r = pieces[-1]
        pieces[-1] = (b, o, c + count, r)
    else:
        pieces.append(piece)
    tails[key] = (buf, off + count, red, far[0], far[1] + count)


class Blocks:
    """A flat buffer held as ``len(blocks)`` consecutive blocks of ``size``
    elements each: the caller's list of tensors used in place (views, not a
    copy into one flat buffer). The executor cuts every transfer at block
    boundaries, so each piece it touches lies inside one block."""

    def __init__(self, blocks: list[torch.Tensor], size: int) -> None:
        self.blocks, self.size = blocks, size
        self.dtype, self.device = blocks[0].dtype, blocks[0].device

    def element_size(self) -> int:
        return self.blocks[0].element_size()

    def numel(self) -> int:
        return self.size * len(self.blocks)

    def __getitem__(self, s: slice) -> torch.Tensor:
        k, lo = divmod(s.start, self.size)
        if s.stop - s.start > self.size - lo:
            raise IndexError(f"elements {s.start}:{s.stop} cross a block boundary (blocks of {self.size})")
        return self.blocks[k][lo : lo + s.stop - s.start]


def cut(rp: RoundPlan, sizes: dict[int, int]) -> RoundPlan:
    """``rp`` with every piece cut where a :class:`Blocks` buffer's blocks end."""

    def pieces(ps: list[Piece]) -> list[Piece]:
        out = []
        for buf, off, count, red in ps:
            size = sizes.get(buf)
            while size and count > size - off % size:
                k = size - off % size
                out.append((buf, off, k, red))
                off, count = off + k, count - k
            out.append((buf, off, count, red))
        return out

    local = []
    for sbuf, soff, dbuf, doff, count, red in rp.local:
        while count:
            k = count
            for buf, off in ((sbuf, soff), (dbuf, doff)):
                if buf in sizes:
                    k = min(k, sizes[buf] - off % sizes[buf])
            local.append((sbuf, soff, dbuf, doff, k, red))
            soff, doff, count = soff + k, doff + k, count - k
    return RoundPlan(
        [(peer, pieces(ps)) for peer, ps in rp.sends],
        [(peer, pieces(ps)) for peer, ps in rp.recvs],
        local,
        rp.reads,
        rp.index,
        rp.channels,
    )


def writes(schedule: Schedule, rank: int, buf: int) -> list[tuple[int, int]]:
    """``(offset, count)`` of every write ``rank`` makes into buffer ``buf``:
    what must not alias a tensor the caller expects unchanged."""
    out = []
    for rp in plan(schedule, rank):
        out += [(off, count) for _, ps in rp.recvs for b, off, count, _ in ps if b == buf]
        out += [(doff, count) for _, _, dbuf, doff, count, _ in rp.local if dbuf == buf]
    return out


def overlaps(piece: Piece, reads: list[tuple[int, int, int]]) -> bool:
    buf, off, count, _ = piece
    return any(b == buf and off < o + c and o < off + count for b, o, c in reads)
