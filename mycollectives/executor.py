"""Run one rank's part of a schedule on a transport.

For each round the executor

1. posts the round's receives and sends together (``transport.exchange``);
   several pieces for one peer travel as one message;
2. waits for each receive in turn and applies it (copy or reduce) while the
   later ones are still in flight, unless it lands on data this rank is
   still sending in this round: those wait until the sends are done;
3. runs the round's local copies.

A transport may cap the size of one message (``max_message_bytes``, set
for gloo): a larger single-piece transfer that the receiver reduces then
travels as several messages to the same peer, all posted at once, so that
the reduction of one segment overlaps the arrival of the next (both ends cut
it the same way, since both see the same transfer). Plain copies travel
whole: cutting them only adds messages.

A transport that holds a received message where the receiver can read it
(shared memory) offers ``work.view()``: a staged receive is then applied
straight from there, with no staging copy, and ``work.release()`` hands the
space back.

That keeps the meaning of a round (sends read the state at its start,
writes land at its end) while overlapping reductions with communication. A
receive that is a plain copy onto data nobody reads in this round goes
straight into place, with no staging copy.

Waiting is bounded: if a peer does not answer within the timeout, the error
names the collective, algorithm, round and peer.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable

import torch

from . import early_sends
from .early_sends import ENV as EARLY_SENDS_ENV  # noqa: F401 (re-exported)
from .errors import CollectiveTimeout, DeadlockError, PeerError
from .plan import Blocks, Piece, RoundPlan, cut, overlaps, plan, writes  # noqa: F401 (re-exported)
from .schedule import BUFFERS, Schedule
from .transport.base import Label, Message, TransportDeadlock, TransportPeerError, TransportTimeout

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
    work, timeout: float, name: str, schedule: Schedule, rnd: int, me: int, peer: int, what: str, call=None
):
    try:
        return (call or work.wait)(timeout)
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
    ``(start, count)`` segments of a single-piece message longer than ``seg``
    that the receiver reduces (it reduces one segment while the next
    arrives; a plain copy gains nothing from the cut but more messages)."""
    count = pieces[0][2]
    if seg is None or len(pieces) != 1 or count <= seg or not pieces[0][3]:
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
    buffers: dict[int, torch.Tensor | Blocks],
    combine: Callable[[torch.Tensor, torch.Tensor], None] | None,
    timeout: float | None = None,
    label: str | None = None,
) -> None:
    """Run ``transport.rank``'s part of ``schedule`` on flat, contiguous ``buffers``
    (or :class:`Blocks` of them).

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

    def receives(rp: RoundPlan) -> list:
        staged_total = sum(sum(p[2] for p in pieces) for _, pieces in rp.recvs)
        staging = workspace(transport, "staging", staged_total, like) if staged_total else None
        recvs, at = [], 0
        for peer, pieces in rp.recvs:
            direct = len(pieces) == 1 and not pieces[0][3] and not overlaps(pieces[0], rp.reads)
            total = sum(p[2] for p in pieces)
            tensor = view(*pieces[0][:3]) if direct else staging[at : at + total]
            if not direct:
                at += total
            for k0, k in _segments(pieces, seg):
                part = pieces if k0 is None else [(pieces[0][0], pieces[0][1] + k0, k, pieces[0][3])]
                t = tensor if k0 is None else tensor[k0 : k0 + k]
                late = not direct and any(overlaps(p, rp.reads) for p in part)
                recvs.append((Message(t, peer), part, direct, late))
        return recvs

    def sends_of(rp: RoundPlan, pack: bool) -> list[tuple[Message | None, int, Piece | None]]:
        """(message, peer, region read if one piece); with ``pack`` False,
        several-piece messages are not packed yet (message None)."""
        out = []
        for peer, pieces in rp.sends:
            one = len(pieces) == 1
            tensor = view(*pieces[0][:3]) if one else (_packed(pieces, view, like) if pack else None)
            for k0, k in _segments(pieces, seg):
                region = (pieces[0][0], pieces[0][1] + (k0 or 0), k, False) if one else None
                if tensor is None:
                    out.append((None, peer, None))
                    continue
                t = tensor if k0 is None else tensor[k0 : k0 + k]
                part = tuple((BUFFERS[b], o + (k0 or 0), k if k0 is not None else c) for b, o, c, _ in pieces)
                out.append((Message(t, peer, part), peer, region))
        return out

    plans = plan(schedule, me)
    sizes = {b: t.size for b, t in buffers.items() if isinstance(t, Blocks)}
    if sizes:
        plans = tuple(cut(rp, sizes) for rp in plans)
    pipeline = early_sends.enabled(transport, seg)  # opt-in, see early_sends
    early: dict[int, object] = {}  # send index of this round -> work of a send posted early
    for j, rp in enumerate(plans):
        tag = Label(name, schedule.algorithm, rp.index)
        recvs = receives(rp)
        sends = sends_of(rp, pack=True)
        todo = [m for i, (m, _, _) in enumerate(sends) if i not in early]
        send_works, recv_works = transport.exchange(todo, [m for m, _, _, _ in recvs], tag)
        works = iter(send_works)
        all_sends = [(m, early[i] if i in early else next(works)) for i, (m, _, _) in enumerate(sends)]
        early = {}
        nxt = plans[j + 1] if pipeline and j + 1 < len(plans) else None
        waiting = early_sends.candidates(rp, recvs, sends_of(nxt, pack=False)) if nxt is not None else {}
        ntag = Label(name, schedule.algorithm, nxt.index) if nxt is not None else None
        if waiting:
            early_sends.release(waiting, None, early, transport, ntag)
        deferred = []
        for idx, ((msg, pieces, direct, late), work) in enumerate(zip(recvs, recv_works)):
            lies = None if direct or late else getattr(work, "view", None)
            if lies is not None:  # read where the transport holds it (shared memory): no staging copy
                apply(
                    _wait(work, timeout, name, schedule, rp.index, me, msg.peer, "receive from", lies), pieces
                )
                work.release()
            else:
                _wait(work, timeout, name, schedule, rp.index, me, msg.peer, "receive from")
                if late:
                    deferred.append((msg.tensor, pieces))
                    continue
                if not direct:
                    apply(msg.tensor, pieces)
            if waiting:
                early_sends.release(waiting, idx, early, transport, ntag)
        for msg, work in all_sends:
            _wait(work, timeout, name, schedule, rp.index, me, msg.peer, "send to")
        for sbuf, soff, dbuf, doff, count, red in rp.local:
            if red:
                combine(view(dbuf, doff, count), view(sbuf, soff, count))
            else:
                view(dbuf, doff, count).copy_(view(sbuf, soff, count))
        for staged, pieces in deferred:
            apply(staged, pieces)
