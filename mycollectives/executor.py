"""Run one rank's part of a schedule on a transport.

For each round of this rank's plan (``plan.py``) the executor

1. posts the round's receives and sends together (``transport.exchange``); several pieces for one
   peer travel as one message;
2. waits for each receive in turn and applies it (copy or reduce) while the later ones are still in
   flight, unless it lands on data this rank is still sending in this round: those wait until the
   sends are done;
3. runs the round's local copies.

That keeps the meaning of a round (sends read the state at its start, writes land at its end) while
overlapping reductions with communication. A receive that is a plain copy onto data nobody reads in
this round goes straight into place. A transport that declares it holds received messages where the
receiver can read them (shared memory; ``transport.contract``) hands them over with ``held()``: the
message is applied from there, with no staging copy, and ``release()`` gives the space back. One that
declares ``strided_messages`` (the virtual cluster) is handed several equal, evenly spaced pieces as
one strided view: such a send needs no packing copy, and such a copy-receive goes straight into place.

A schedule cut into channels (``algorithms/channels.py``) runs, on a transport that declares
``channels_apart`` (the virtual cluster), as NCCL runs its channels: each *strand* (``plan.strands``:
the channels whose rings or trees join the same ranks) goes through its own rounds at its own pace,
and the call ends when its last strand does (:meth:`_Run.apart`). Elsewhere round ``i`` of every
channel runs together.

Waiting is bounded: if a peer does not answer within the timeout, the error names the collective,
algorithm, round and peer.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable

import torch

from . import flight
from .errors import CollectiveTimeout, DeadlockError, PeerError
from .landing import apply, settle  # noqa: F401 (settle re-exported: the load/store path's)
from .plan import Blocks, Piece, RoundPlan, cut, plan, strands, writes  # noqa: F401 (Blocks, writes re-exported)
from .schedule import BUFFERS, Schedule
from .transport.base import TransportDeadlock, TransportPeerError, TransportTimeout
from .transport.contract import capabilities
from .transport.message import Label, Message

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
        views = bufs.get(("views", like.dtype, like.device), {})  # the old memory's views (staged_views)
        for k in [k for k in views if k[0] == slot]:
            del views[k]
    return t if t.numel() == numel else t[:numel]


def staged_views(transport, like: torch.Tensor) -> dict:
    """Views of ``transport``'s workspaces (for ``like``'s dtype and device) by (slot, total, at, count),
    kept across calls: each is a torch op to make. Dropped with their slot's memory when it grows."""
    try:
        return _workspaces.setdefault(transport, {}).setdefault(("views", like.dtype, like.device), {})
    except TypeError:  # a transport that cannot be weakly referenced
        return {}


def wait_for(call, timeout: float, where: str, peer: int | None, what: str, note=flight.NOBODY):
    """``call(timeout)``, its transport's errors turned into the package's,
    each naming the collective, round and peer (``where`` says the first two;
    ``peer`` None: the one the transport's error names). The flight recorder's
    ``note`` says whom this rank waits on meanwhile. The executor and the
    load/store path both wait through here."""
    note.peer, note.what = peer, what
    try:
        out = call(timeout)
    except (TransportTimeout, TransportPeerError) as e:  # a TransportDeadlock is a TransportTimeout
        who = peer if peer is not None else e.peer if e.peer is not None else "?"
        note.peer = e.peer if peer is None else peer
        if isinstance(e, TransportDeadlock):
            raise DeadlockError(f"{where}: {what} rank {who}: {e}") from e
        if isinstance(e, TransportTimeout):
            raise CollectiveTimeout(
                f"{where}: {what} rank {who} timed out after {timeout:g} s (did rank {who} join this collective?)"
            ) from e
        raise PeerError(f"{where}: {what} rank {who} failed: {e}") from e
    note.peer = note.what = None
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
    (or :class:`Blocks` of them). ``combine(acc, x)`` folds ``x`` into ``acc``."""
    name = label or schedule.collective
    caps = capabilities(transport)
    if not caps.messages:
        raise ValueError(
            f"{name} on rank {transport.rank}: {type(transport).__name__} declares no messages; "
            "it cannot run a schedule by sending and receiving"
        )
    run = _Run(schedule, transport, buffers, combine, timeout or transport.timeout, name, caps)
    sizes = {b: t.size for b, t in buffers.items() if isinstance(t, Blocks)}
    apart = strands(schedule) if caps.channels_apart else ((-1,),)
    plans = [plan(schedule, transport.rank, s) for s in apart]
    if sizes:
        plans = [[cut(rp, sizes) for rp in rounds] for rounds in plans]
    if len(plans) == 1:
        for rp in plans[0]:
            for _ in run.round(rp):  # each wait happens in the round itself
                pass
    else:
        run.apart(plans)


class _Run:
    """One rank's run of one schedule: its buffers, and how a round goes."""

    def __init__(
        self, schedule: Schedule, transport, buffers: dict, combine, timeout: float, name: str, caps
    ):
        self.schedule, self.transport, self.buffers, self.combine = schedule, transport, buffers, combine
        self.timeout, self.name, self.me = timeout, name, transport.rank
        self.like = next(iter(buffers.values()))
        self.in_place = caps.read_in_place  # held() and release() (ReadsInPlace)
        self.strided = caps.strided_messages  # takes evenly spaced pieces as one strided view
        self.note = flight.current()
        self.note.enter(schedule.algorithm, len(schedule.rounds), name)
        self._views: dict[tuple, torch.Tensor | None] = {}
        self._staged = staged_views(transport, self.like)

    def view(self, buf: int, off: int, count: int) -> torch.Tensor:
        """Elements ``off:off + count`` of buffer ``buf``: each slice is a torch op, so each is made once per
        call (a chunk is received, reduced into and sent on: most are asked for several times)."""
        key = (buf, off, count)
        v = self._views.get(key)
        if v is None:
            t = self.buffers[buf]
            v = self._views[key] = t if off == 0 and count == t.numel() else t[off : off + count]
        return v

    def apply(self, data: torch.Tensor, pieces: list[Piece]) -> None:
        apply(data, pieces, self.view, self.combine)

    def land(self, parts: list[torch.Tensor], pieces: list[Piece]) -> None:
        """Copy or reduce each staged part into where its piece lands (as :func:`apply`, the parts cut)."""
        for part, (buf, off, count, red) in zip(parts, pieces):
            into = self.view(buf, off, count)
            if red:
                self.combine(into, part)
            else:
                into.copy_(part)

    def packed(self, pieces: list[Piece]) -> torch.Tensor:
        """One peer's pieces end to end: a view if one (or, where the transport takes strided messages,
        if they are equal and evenly spaced in one buffer), else a fresh copy."""
        if len(pieces) == 1:
            return self.view(*pieces[0][:3])
        v = self.strided_view(pieces) if self.strided else None
        return v if v is not None else torch.cat([self.view(b, o, c) for b, o, c, _ in pieces])

    def strided_view(self, pieces: list[Piece]) -> torch.Tensor | None:
        """The pieces as rows of one strided view of their buffer, made once per call (a chunk received
        is often sent on); None unless they are equal, in one flat tensor, at evenly spaced, increasing,
        non-overlapping offsets (a strand's channels: one piece of each channel's slice), or data-free
        (a meta tensor's packing copy costs nothing, while its strided view and copies are slower)."""
        key = tuple([p[:3] for p in pieces])
        v = self._views.get(key, False)
        if v is False:
            (buf, off, count), gap = key[0], key[1][1] - key[0][1]
            t, v = self.buffers[buf], None
            even = gap >= count and all(p == (buf, off + i * gap, count) for i, p in enumerate(key))
            if even and isinstance(t, torch.Tensor) and t.dim() == 1 and t.stride(0) == 1 and not t.is_meta:
                v = t.as_strided((len(key), count), (gap, 1), t.storage_offset() + off)
            self._views[key] = v
        return v

    def receives(self, rp: RoundPlan, strand: int) -> list[tuple[Message, list[Piece], str, list | None]]:
        """Each receive of the round, with where it lands: ``direct`` (in place), ``now`` (staged, applied
        on arrival) or ``late`` (staged, applied at the round's end: it lands on data this rank still
        sends), and where a staged one's pieces lie in the staging."""
        total = sum(p[2] for _, pieces in rp.recvs for p in pieces)
        slot = f"staging {strand}" if strand else "staging"  # strands in flight at once stage apart
        at, recvs = 0, []
        for (peer, pieces), mode in zip(rp.recvs, rp.modes):
            if mode == "direct":
                recvs.append((Message(self.view(*pieces[0][:3]), peer), pieces, mode, None))
                continue
            copy = mode == "now" and self.strided and not any(p[3] for p in pieces)
            into = self.strided_view(pieces) if copy else None
            if into is not None:  # copies onto data nobody reads this round: straight into place
                recvs.append((Message(into, peer), pieces, "direct", None))
                continue
            count, parts, sub = sum(p[2] for p in pieces), [], at
            for piece in pieces:  # where each piece lies in the staging, a view kept across calls
                parts.append(self.staged(slot, total, sub, piece[2]))
                sub += piece[2]
            recvs.append((Message(self.staged(slot, total, at, count), peer), pieces, mode, parts))
            at += count
        return recvs

    def staged(self, slot: str, total: int, at: int, count: int) -> torch.Tensor:
        """``count`` elements at ``at`` of a round's ``total`` in the workspace ``slot``, each view made once
        (a round's staging is done with before the strand's next round, or the next call, uses it again)."""
        key = (slot, total, at, count)
        v = self._staged.get(key)
        if v is None:
            whole = self._staged.get((slot, total, 0, total))
            if whole is None:
                whole = self._staged[(slot, total, 0, total)] = workspace(
                    self.transport, slot, total, self.like
                )
            v = self._staged[key] = whole if count == total else whole[at : at + count]
        return v

    def round(self, rp: RoundPlan, strand: int = 0):
        """Post the round's messages, apply each receive as it arrives, wait for the sends, copy, settle.
        A generator: it yields ``(work, peer, what, where)`` before each wait (see :meth:`apart`)."""
        s, t = self.schedule, self.transport
        self.note.round = rp.index
        where = f"{self.name} ({s.algorithm}) on rank {self.me}: round {rp.index} of {len(s.rounds)}"
        recvs = self.receives(rp, strand)
        sends = [
            Message(self.packed(pieces), peer, tuple((BUFFERS[b], o, c) for b, o, c, _ in pieces), ch)
            for (peer, pieces), ch in zip(rp.sends, rp.channels or [-1] * len(rp.sends))
        ]
        post = functools.partial(
            t.exchange, sends, [r[0] for r in recvs], Label(self.name, s.algorithm, rp.index, strand)
        )
        send_works, recv_works = wait_for(lambda _: post(), self.timeout, where, None, "post to", self.note)
        deferred = []
        for (msg, pieces, mode, parts), work in zip(recvs, recv_works):
            yield work, msg.peer, "receive from", where
            if mode == "now" and self.in_place:  # read where the transport holds it (shared memory)
                data = wait_for(
                    functools.partial(t.held, work), self.timeout, where, msg.peer, "receive from", self.note
                )
                if data is not None:
                    self.apply(data, pieces)
                    t.release(work)
                    continue
            wait_for(work.wait, self.timeout, where, msg.peer, "receive from", self.note)
            if mode == "now":
                self.land(parts, pieces)
            elif mode == "late":
                deferred.append((msg.peer, msg.tensor, pieces))
        for msg, work in zip(sends, send_works):
            yield work, msg.peer, "send to", where
            wait_for(work.wait, self.timeout, where, msg.peer, "send to", self.note)
        for sbuf, soff, dbuf, doff, count, red in rp.local:
            self.apply(self.view(sbuf, soff, count), [(dbuf, doff, count, red)])
        settle(deferred, self.me, self.view, self.combine)

    def strand(self, rounds, s: int):
        for rp in rounds:
            yield from self.round(rp, s)

    def apart(self, plans: list) -> None:
        """Run each strand's rounds (``plans[s]``) at its own pace, as NCCL runs its channels: every
        strand's first round is posted, then whichever strand's awaited message the transport says is
        in (``wait_any``) goes on, up to its next wait; the call ends when its last strand ends."""
        heads: dict[int, tuple] = {}

        def step(s: int, steps) -> None:
            item = next(steps, None)
            if item is None:
                heads.pop(s, None)
            else:
                heads[s] = (steps, item)

        for s, rounds in enumerate(plans):
            step(s, self.strand(rounds, s))
        while heads:
            order = list(heads)
            works = [heads[s][1][0] for s in order]
            _, peer, what, where = heads[order[0]][1]
            i = wait_for(
                functools.partial(self.transport.wait_any, works), self.timeout, where, peer, what, self.note
            )
            step(order[i], heads[order[i]][0])
