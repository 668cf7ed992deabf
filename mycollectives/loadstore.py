"""Running a schedule on symmetric memory: every transfer is a read by its destination.

The message-passing executor (``executor.py``) copies each message out of the
sender and into the receiver. On symmetric memory (:mod:`mycollectives.symmetric`)
the receiver reads the sender's buffer where it lies, and reduces or copies it
straight into its own: the schedule is the same, the copies are fewer.

A round keeps its meaning (every transfer reads the state at the start of
the round, writes land at its end) with barriers on the signal pads: one
before each round, so that every rank's writes of the previous round are in
place before anyone reads; and one at the end, so that no rank changes its
buffer while a peer still reads it (unless the last round ended with late
writes: their barrier already followed every read). A write that lands on a region some other
rank reads in the same round (the one-shot all-reduce adds into the very
vector its peers read) goes to private staging first and is applied after
one more barrier; everything else is applied as it is read.

Each rank reads a peer's buffer at the *peer's* byte offset in its block:
the ranks of a call may pass tensors at different places of the heap (a
legal layout, which torch runs too). Before the first barrier every rank
writes its buffers' offsets in its signal pad (``places``); after it, every
rank reads its peers'. Where the argument check has already compared them
and found them equal, the call starts without that barrier (``ready``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
import torch

from . import flight
from .executor import settle, wait_for
from .plan import overlaps, plan
from .schedule import Schedule

Item = tuple[int, int, int, int, int, int, bool, bool]  # src, sbuf, soff, dbuf, doff, count, reduce, late


@functools.lru_cache(maxsize=1024)
def reads(schedule: Schedule, me: int) -> tuple[tuple[tuple[Item, ...], bool], ...]:
    """Per round, what ``me`` reads and where it goes, and whether any rank has
    late writes in it (then every rank takes the extra barrier). ``late`` marks
    a write onto a region some rank reads in the same round (a peer, or ``me``
    for a copy of its own), applied only once every rank has read. What a rank
    reads in a round is the executor's plan's (:func:`~mycollectives.plan.plan`):
    the regions it would send, which here its peers load."""
    read = [{rp.index: rp.reads for rp in plan(schedule, r)} for r in range(schedule.world_size)]
    out = []
    for k, rnd in enumerate(schedule.rounds):
        items, any_late = [], False
        for src, dst, sbuf, soff, dbuf, doff, count, red in rnd.transfers():
            late = overlaps((dbuf, doff, count, red), read[dst].get(k, ()))
            any_late |= late
            if dst == me:
                items.append((src, sbuf, soff, dbuf, doff, count, bool(red), late))
        out.append((tuple(items), any_late))
    return tuple(out)


@functools.lru_cache(maxsize=1024)
def traffic(schedule: Schedule, me: int, item: int) -> tuple[tuple[tuple[int, int], ...], ...]:
    """Per round, the bytes ``me`` loads from each peer, ``(src, nbytes)`` (its own copies load
    nothing): what a handle that prices loads is told (``PricesLoads``, ``transport/contract.py``)."""
    out = []
    for items, _ in reads(schedule, me):
        per: dict[int, int] = {}
        for src, _, _, _, _, count, _, _ in items:
            if src != me:
                per[src] = per.get(src, 0) + count * item
        out.append(tuple(sorted(per.items())))
    return tuple(out)


def _views(schedule: Schedule, handle, where: tuple, dtype: torch.dtype, me: int):
    """Per round: ``(read, into, src, reduce, late, where)`` for every read of
    ``me``, the tensors already sliced out of the heap (cached on the handle:
    a repeated call slices nothing), and whether the round has late writes.
    ``where[r]``: rank ``r``'s byte offset of each buffer (one row: the same on every rank)."""
    key = (schedule, where, dtype)
    cached = handle.plans.get(key)
    if cached is not None:
        return cached
    item = torch.empty(0, dtype=dtype).element_size()

    def region(rank: int, buf: int, off: int, count: int) -> torch.Tensor:
        start = where[rank if len(where) > 1 else 0][buf] + off * item
        return handle.segment(rank)[start : start + count * item].view(dtype)

    out = []
    for items, any_late in reads(schedule, me):
        views = [
            (
                region(src, sbuf, soff, count),
                region(me, dbuf, doff, count),
                src,
                red,
                late,
                (dbuf, doff, count),
            )
            for src, sbuf, soff, dbuf, doff, count, red, late in items
        ]
        out.append((views, any_late))
    if len(handle.plans) > 256:  # many call shapes: keep the cache bounded
        handle.plans.clear()
    handle.plans[key] = out
    return out


def _row(offsets: dict[int, int], width: int) -> np.ndarray:
    """This rank's ``places`` words: the byte offset of each buffer, -1 where it has none."""
    row = np.full(width, -1, dtype=np.int64)
    for buf, at in offsets.items():
        row[buf] = at
    return row


def _placed(handle, row: np.ndarray) -> tuple:
    """Every rank's buffer offsets, read after the barrier that follows their writing: one
    row where every rank's is this rank's (the common case), else one row per rank."""
    every = np.stack([p[: len(row)] for p in handle.places()])
    if (every == row).all():
        return (tuple(int(x) for x in row),)
    return tuple(tuple(int(x) for x in r) for r in every)


def execute(
    schedule: Schedule,
    handle,
    offsets: dict[int, int],
    dtype: torch.dtype,
    combine: Callable[[torch.Tensor, torch.Tensor], None] | None,
    timeout: float | None = None,
    label: str | None = None,
    ready: bool = False,
) -> None:
    """Run ``handle.rank``'s part of ``schedule`` on symmetric memory; each
    buffer lies at byte ``offsets[buffer]`` of this rank's block (a peer's
    wherever that peer says: see the module). ``ready``: a barrier since every
    rank's buffers were last written has already passed (the argument check's,
    for a call whose tensors are used as given, at the same offsets on every
    rank), so the first round needs none of its own."""
    me = handle.rank
    name = label or schedule.collective
    note = flight.current()  # the flight recorder: round, and the barrier this rank waits in
    note.enter(schedule.algorithm, len(schedule.rounds), name)

    timeout = timeout or handle.timeout
    at = f"{name} ({schedule.algorithm}) on rank {me}"
    loads = traffic(schedule, me, torch.empty(0, dtype=dtype).element_size()) if handle.prices_loads else ()

    def sync(stage: str) -> None:
        wait_for(lambda t: handle.barrier(0, t), timeout, at, None, f"barrier {stage}: waiting for", note)

    row = _row(offsets, len(handle.places()[me]))
    if not ready:
        handle.places()[me][:] = row  # read by the peers after this barrier, rewritten after the next
        sync("before round 0")
    where = (tuple(int(x) for x in row),) if ready else _placed(handle, row)
    plan = _views(schedule, handle, where, dtype, me)
    mine = {where: into for views, _ in plan for _, into, _, _, _, where in views}
    for k, (views, any_late) in enumerate(plan):
        note.round = k
        if k:
            sync(f"before round {k} of {len(schedule.rounds)}")
        staged = []
        for data, into, src, red, late, where in views:
            if late:
                staged.append((src, data.clone(), [(*where, red)]))
            elif red:
                combine(into, data)
            else:
                into.copy_(data)
        if loads:
            handle.loads(k, loads[k])
        if any_late:  # every rank, so that all take the same barriers
            sync(f"round {k}, before its late writes")
            settle(staged, me, lambda b, o, c: mine[b, o, c], combine)
    if plan and not plan[-1][1]:  # after late writes nobody reads any more: that barrier was the last
        sync("after the last round")
