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

import dataclasses
import functools
from dataclasses import dataclass

import torch

from .schedule import Schedule

Piece = tuple[int, int, int, bool]  # (buffer, offset, count, reduce)


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


@functools.lru_cache(maxsize=1024)
def plan(schedule: Schedule, rank: int) -> tuple[RoundPlan, ...]:
    """This rank's view of the schedule: what to send, receive and copy, per round."""
    out, rails = [], schedule.params.get("local_size") or 1 << 30  # channels c and c + local share a rail
    for i, rnd in enumerate(schedule.rounds):
        sends: dict[int, list[Piece]] = {}
        recvs: dict[int, list[Piece]] = {}
        local, reads, channel, tails = [], [], {}, {}
        for (src, dst, sbuf, soff, dbuf, doff, count, red), ch in zip(rnd.transfers(), rnd.channel.tolist()):
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
