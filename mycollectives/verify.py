"""Prove that a schedule computes its collective, by symbolic execution.

Instead of numbers, every element of every buffer carries *what it is*: the
index of the element it stands for (``ids``) and the set of ranks whose
contributions it holds (``masks``, one bit per rank; 0 means "nothing yet").
A copy moves these labels; a reduction merges two labels, and is an error
unless both stand for the same element and hold disjoint sets of ranks (a
rank counted twice is the classic bug of a hand-made all-reduce).

Rounds keep their meaning from ``schedule.py``: every transfer reads the state
at the start of the round, and writes land at its end. Two writes to one
element in a round are an error unless both are reductions.

At the end each rank's buffers are compared with what the collective must
produce (see each algorithm module's "Buffer layout"). A barrier is checked
by causality instead: every rank must have heard, directly or through
others, from every rank.

>>> from mycollectives.algorithms import Spec, build
>>> verify(build(Spec("all_reduce", 6, count=7), "ring"))
"""

from __future__ import annotations

import numpy as np

from .algorithms import Spec
from .schedule import BUFFERS, IN, OUT, WORK, Schedule


class VerificationError(AssertionError):
    """A schedule does not compute its collective; the message says where."""


def _labels(n: int, ids=None, owner=None) -> list[np.ndarray]:
    out_ids = np.full(n, -1, dtype=np.int64) if ids is None else np.asarray(ids, dtype=np.int64)
    masks = np.zeros(n, dtype=np.uint64)
    if owner is not None:
        masks[:] = np.uint64(1) << np.uint64(owner)
    return [out_ids, masks]


def _init(sched: Schedule, spec: Spec, rank: int) -> dict[int, list[np.ndarray]]:
    p, n, c, root = sched.world_size, spec.count, sched.collective, spec.root
    state = {buf: _labels(int(size[rank])) for buf, size in sched.buffers.items()}
    work = state.get(WORK)
    if c in ("reduce", "all_reduce", "reduce_scatter") or (c == "broadcast" and rank == root):
        state[WORK] = _labels(len(work[0]), np.arange(len(work[0])), rank)
    elif c == "scatter" and rank == root:
        state[WORK] = _labels(p * n, np.arange(p * n), rank)
    elif c in ("all_gather", "gather"):
        slot = rank if c == "all_gather" else (rank - root) % p
        work[0][slot * n : (slot + 1) * n] = slot * n + np.arange(n)
        work[1][slot * n : (slot + 1) * n] = np.uint64(1) << np.uint64(rank)
    elif c == "all_to_all":
        rows = np.asarray(spec.splits, dtype=np.int64).reshape(p, p).sum(axis=1)
        base = int(np.sum(rows[:rank]))
        state[IN] = _labels(int(rows[rank]), base + np.arange(rows[rank]), rank)
    return state


def _expected(sched: Schedule, spec: Spec, rank: int):
    """``(buffer, offset, ids, masks)`` that must hold on ``rank`` at the end."""
    p, n, c, root = sched.world_size, spec.count, sched.collective, spec.root
    full = np.uint64((1 << p) - 1)
    one = np.uint64(1)
    if c == "broadcast":
        return [(WORK, 0, np.arange(n), np.full(n, one << np.uint64(root)))]
    if c == "all_reduce" or (c == "reduce" and rank == root):
        return [(WORK, 0, np.arange(n), np.full(n, full))]
    if c == "all_gather" or (c == "gather" and rank == root):
        slots = np.arange(p * n) // n if n else np.zeros(0, np.int64)
        owners = slots if c == "all_gather" else (root + slots) % p
        return [(WORK, 0, np.arange(p * n), one << owners.astype(np.uint64))]
    if c == "reduce_scatter":
        return [(WORK, rank * n, rank * n + np.arange(n), np.full(n, full))]
    if c == "scatter":
        v = (rank - root) % p
        return [(WORK, v * n, v * n + np.arange(n), np.full(n, one << np.uint64(root)))]
    if c == "all_to_all":
        m = np.asarray(spec.splits, dtype=np.int64).reshape(p, p)
        base = np.cumsum(m.sum(axis=1)) - m.sum(axis=1)
        in_off = np.cumsum(m, axis=1) - m
        ids = [base[s] + in_off[s, rank] + np.arange(m[s, rank]) for s in range(p)]
        owners = [np.full(m[s, rank], one << np.uint64(s)) for s in range(p)]
        return [(OUT, 0, np.concatenate(ids), np.concatenate(owners))]
    return []


def _where(rnd: int, t, what: str) -> str:
    src, dst, sbuf, soff, dbuf, doff, count, red = t
    kind = "reduce" if red else "copy"
    return (
        f"round {rnd}: {kind} of {count} elements from rank {src} {BUFFERS[sbuf]}[{soff}:] "
        f"to rank {dst} {BUFFERS[dbuf]}[{doff}:]: {what}"
    )


def verify(schedule: Schedule, spec: Spec | None = None) -> None:
    """Raise :class:`VerificationError` unless ``schedule`` computes its collective.

    ``spec`` defaults to the one the schedule was built from (its ``params``).
    Works for world sizes up to 64 (one bit per rank).
    """
    p = schedule.world_size
    if p > 64:
        raise ValueError("verify works for world sizes up to 64")
    if spec is None:
        spec = Spec(schedule.collective, p, **schedule.params)
    state = [_init(schedule, spec, r) for r in range(p)]
    heard = [1 << r for r in range(p)]  # causality: whom each rank has heard from

    for rnd, round_ in enumerate(schedule.rounds):
        reads = []
        for t in round_.transfers():
            src, dst, sbuf, soff, dbuf, doff, count, red = t
            if not (0 <= src < p and 0 <= dst < p):
                raise VerificationError(_where(rnd, t, "rank out of range"))
            for rank, buf, off in ((src, sbuf, soff), (dst, dbuf, doff)):
                size = len(state[rank][buf][0]) if buf in state[rank] else 0
                if off < 0 or off + count > size:
                    raise VerificationError(_where(rnd, t, f"outside {BUFFERS[buf]} of {size} elements"))
            ids, masks = state[src][sbuf]
            reads.append((t, ids[soff : soff + count].copy(), masks[soff : soff + count].copy()))
        written: dict[tuple[int, int], np.ndarray] = {}  # (rank, buf) -> 0 free, 1 copied, 2 reduced
        new_heard = list(heard)
        for t, ids, masks in reads:
            src, dst, sbuf, soff, dbuf, doff, count, red = t
            new_heard[dst] |= heard[src]
            mark = written.setdefault((dst, dbuf), np.zeros(len(state[dst][dbuf][0]), np.int8))
            region = mark[doff : doff + count]
            if (region == 1).any() or (not red and region.any()):
                raise VerificationError(_where(rnd, t, "another transfer writes the same elements"))
            region[:] = 2 if red else 1
            d_ids, d_masks = state[dst][dbuf]
            if not red:
                d_ids[doff : doff + count], d_masks[doff : doff + count] = ids, masks
                continue
            here_ids, here = d_ids[doff : doff + count], d_masks[doff : doff + count]
            if (masks == 0).any() or (here == 0).any():
                raise VerificationError(_where(rnd, t, "reduces elements that hold no data yet"))
            if (here_ids != ids).any():
                raise VerificationError(_where(rnd, t, "adds up different elements (misaligned chunks)"))
            if (here & masks).any():
                raise VerificationError(_where(rnd, t, "counts some rank's contribution twice"))
            d_masks[doff : doff + count] = here | masks
        heard = new_heard

    everyone = (1 << p) - 1
    for rank in range(p):
        if schedule.collective == "barrier" and heard[rank] != everyone:
            missing = [r for r in range(p) if not heard[rank] >> r & 1]
            raise VerificationError(f"barrier: rank {rank} may leave before hearing from ranks {missing}")
        for buf, off, ids, masks in _expected(schedule, spec, rank):
            got_ids, got = (
                state[rank][buf][0][off : off + len(ids)],
                state[rank][buf][1][off : off + len(ids)],
            )
            bad = np.flatnonzero((got_ids != ids) | (got != masks))
            if len(bad):
                i = int(bad[0])
                have = [r for r in range(p) if int(got[i]) >> r & 1]
                want = [r for r in range(p) if int(masks[i]) >> r & 1]
                raise VerificationError(
                    f"{schedule.collective}/{schedule.algorithm} p={p}: rank {rank} {BUFFERS[buf]}[{off + i}] "
                    f"holds element {int(got_ids[i])} from ranks {have}, expected element {int(ids[i])} "
                    f"from ranks {want} ({len(bad)} elements wrong)"
                )
