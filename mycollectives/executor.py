"""Run one rank's part of a schedule on a transport.

For each round the executor

1. posts the round's receives and sends together (``transport.exchange``);
   several pieces for one peer travel as one message;
2. waits for each receive in turn and applies it (copy or reduce) while the
   later ones are still in flight, unless it lands on data this rank is
   still sending in this round: those wait until the sends are done;
3. runs the round's local copies.

A transport may cap the size of one message (``max_message_bytes``, set
for gloo): a larger single-piece transfer then travels as several messages
to the same peer, all posted at once, so that the reduction of one segment
overlaps the arrival of the next (both ends cut it the same way, since both
see the same transfer).

That keeps the meaning of a round (sends read the state at its start,
writes land at its end) while overlapping reductions with communication. A
receive that is a plain copy onto data nobody reads in this round goes
straight into place, with no staging copy.

Waiting is bounded: if a peer does not answer within the timeout, the error
names the collective, algorithm, round and peer.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from dataclasses import dataclass

import torch

from .errors import CollectiveTimeout, DeadlockError, PeerError
from .schedule import BUFFERS, Schedule
from .transport.base import Label, Message, TransportDeadlock, TransportPeerError, TransportTimeout

Piece = tuple[int, int, int, bool]  # (buffer, offset, count, reduce)


@dataclass
class RoundPlan:
    sends: list[tuple[int, list[Piece]]]  # (peer, pieces) per message
    recvs: list[tuple[int, list[Piece]]]
    local: list[tuple[int, int, int, int, int, bool]]  # (sbuf, soff, dbuf, doff, count, reduce)
    reads: list[tuple[int, int, int]]  # (buffer, offset, count) this rank reads this round
    index: int


@functools.lru_cache(maxsize=1024)
def plan(schedule: Schedule, rank: int) -> tuple[RoundPlan, ...]:
    """This rank's view of the schedule: what to send, receive and copy, per round."""
    out = []
    for i, rnd in enumerate(schedule.rounds):
        sends: dict[int, list[Piece]] = {}
        recvs: dict[int, list[Piece]] = {}
        local, reads = [], []
        for src, dst, sbuf, soff, dbuf, doff, count, red in rnd.transfers():
            if src == rank and dst == rank:
                local.append((sbuf, soff, dbuf, doff, count, red))
                reads.append((sbuf, soff, count))
            elif src == rank:
                sends.setdefault(dst, []).append((sbuf, soff, count, False))
                reads.append((sbuf, soff, count))
            elif dst == rank:
                recvs.setdefault(src, []).append((dbuf, doff, count, red))
        if sends or recvs or local:
            out.append(RoundPlan(list(sends.items()), list(recvs.items()), local, reads, i))
    return tuple(out)


def _overlaps(piece: Piece, reads: list[tuple[int, int, int]]) -> bool:
    buf, off, count, _ = piece
    return any(b == buf and off < o + c and o < off + count for b, o, c in reads)


_workspaces: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def workspace(transport, slot: str, numel: int, like: torch.Tensor) -> torch.Tensor:
    """``numel`` elements of memory kept per (transport, slot, dtype, device).

    Grown on demand and reused by later calls: fresh pages cost a page fault
    each, while a call's working memory never outlives the call and a
    transport runs one collective at a time. Different slots never alias.
    """
    try:
        bufs = _workspaces.setdefault(transport, {})
    except TypeError:  # a transport that cannot be weakly referenced
        return torch.empty(numel, dtype=like.dtype, device=like.device)
    key = (slot, like.dtype, like.device)
    t = bufs.get(key)
    if t is None or t.numel() < numel:
        t = bufs[key] = torch.empty(max(numel, 1), dtype=like.dtype, device=like.device)
    return t[:numel]


def _wait(
    work, timeout: float, name: str, schedule: Schedule, rnd: int, me: int, peer: int, what: str
) -> None:
    try:
        work.wait(timeout)
    except TransportDeadlock as e:
        raise DeadlockError(
            f"{name} ({schedule.algorithm}) on rank {me}: round {rnd} of "
            f"{len(schedule.rounds)}: {what} rank {peer}: {e}"
        ) from e
    except TransportTimeout as e:
        raise CollectiveTimeout(
            f"{name} ({schedule.algorithm}) on rank {me}: round {rnd} of "
            f"{len(schedule.rounds)}: {what} rank {peer} timed out after {timeout:g} s "
            f"(did rank {peer} join this collective?)"
        ) from e
    except TransportPeerError as e:
        raise PeerError(
            f"{name} ({schedule.algorithm}) on rank {me}: round {rnd}: {what} rank {peer} failed: {e}"
        ) from e


def _segments(pieces: list[Piece], seg: int | None):
    """How one peer's message is cut: ``[(None, total)]`` (whole), or
    ``(start, count)`` segments of a single-piece message longer than ``seg``."""
    count = pieces[0][2]
    if seg is None or len(pieces) != 1 or count <= seg:
        return [(None, sum(p[2] for p in pieces))]
    return [(k0, min(seg, count - k0)) for k0 in range(0, count, seg)]


def _packed(pieces: list[Piece], view, like: torch.Tensor) -> torch.Tensor:
    """Several pieces for one peer, copied end to end into one fresh tensor
    (it stays alive until the send completes)."""
    out = torch.empty(sum(p[2] for p in pieces), dtype=like.dtype, device=like.device)
    at = 0
    for b, o, c, _ in pieces:
        out[at : at + c].copy_(view(b, o, c))
        at += c
    return out


def execute(
    schedule: Schedule,
    transport,
    buffers: dict[int, torch.Tensor],
    combine: Callable[[torch.Tensor, torch.Tensor], None] | None,
    timeout: float | None = None,
    label: str | None = None,
) -> None:
    """Run ``transport.rank``'s part of ``schedule`` on flat, contiguous ``buffers``.

    ``combine(acc, x)`` folds ``x`` into ``acc`` for reducing transfers.
    """
    me = transport.rank
    timeout = timeout or transport.timeout
    like = next(iter(buffers.values()))
    name = label or schedule.collective
    limit = getattr(transport, "max_message_bytes", None)
    seg = max(1, limit // like.element_size()) if limit else None

    def view(buf: int, off: int, count: int) -> torch.Tensor:
        return buffers[buf][off : off + count]

    def apply(staged: torch.Tensor, pieces: list[Piece]) -> None:
        at = 0
        for buf, off, count, red in pieces:
            part = staged[at : at + count]
            if red:
                combine(view(buf, off, count), part)
            else:
                view(buf, off, count).copy_(part)
            at += count

    for rp in plan(schedule, me):
        tag = Label(name, schedule.algorithm, rp.index)
        staged_total = sum(sum(p[2] for p in pieces) for _, pieces in rp.recvs)
        staging = workspace(transport, "staging", staged_total, like) if staged_total else None
        recvs, at = [], 0
        for peer, pieces in rp.recvs:
            direct = len(pieces) == 1 and not pieces[0][3] and not _overlaps(pieces[0], rp.reads)
            total = sum(p[2] for p in pieces)
            tensor = view(*pieces[0][:3]) if direct else staging[at : at + total]
            if not direct:
                at += total
            for k0, k in _segments(pieces, seg):
                part = pieces if k0 is None else [(pieces[0][0], pieces[0][1] + k0, k, pieces[0][3])]
                t = tensor if k0 is None else tensor[k0 : k0 + k]
                recvs.append((Message(t, peer), part, direct))
        sends = []
        for peer, pieces in rp.sends:
            tensor = _packed(pieces, view, like) if len(pieces) > 1 else view(*pieces[0][:3])
            for k0, k in _segments(pieces, seg):
                t = tensor if k0 is None else tensor[k0 : k0 + k]
                part = tuple((BUFFERS[b], o + (k0 or 0), k if k0 is not None else c) for b, o, c, _ in pieces)
                sends.append(Message(t, peer, part))

        send_works, recv_works = transport.exchange(sends, [m for m, _, _ in recvs], tag)
        deferred = []
        for (msg, pieces, direct), work in zip(recvs, recv_works):
            _wait(work, timeout, name, schedule, rp.index, me, msg.peer, "receive from")
            if direct:
                continue
            if any(_overlaps(p, rp.reads) for p in pieces):
                deferred.append((msg.tensor, pieces))
            else:
                apply(msg.tensor, pieces)
        for msg, work in zip(sends, send_works):
            _wait(work, timeout, name, schedule, rp.index, me, msg.peer, "send to")
        for sbuf, soff, dbuf, doff, count, red in rp.local:
            if red:
                combine(view(dbuf, doff, count), view(sbuf, soff, count))
            else:
                view(dbuf, doff, count).copy_(view(sbuf, soff, count))
        for staged, pieces in deferred:
            apply(staged, pieces)
