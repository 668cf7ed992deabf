"""Prove that a schedule computes its collective, by symbolic execution.

Instead of numbers, every element of every buffer carries *what it is*: the
index of the input element it stands for (``ids``) and the set of ranks whose
contributions it holds (``masks``, one bit per rank; 0 means "nothing yet").
A copy moves these labels; a reduction merges two labels, and is an error
unless both stand for the same element and hold disjoint sets of ranks (a
rank counted twice is the classic bug of a hand-made all-reduce).

Rounds keep their meaning from ``schedule.py``: every transfer reads the state
at the start of the round, and writes land at its end. Two writes to one
element in a round are an error unless both are reductions.

The start and the end come from the collective's record
(:mod:`mycollectives.collectives`): each rank's input, labelled, is put where
the record's ``input_at`` says, and at the end every output piece must hold
what the record's oracle computes from the labelled inputs. A barrier is
checked by causality instead: every rank must have heard, directly or
through others, from every rank.

>>> from mycollectives.algorithms import Spec, build
>>> verify(build(Spec("all_reduce", 6, count=7), "ring"))
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from .collectives import Spec, labelled_inputs, labelled_outputs
from .schedule import BUFFERS, Schedule

State = list[dict[int, list[np.ndarray]]]  # per rank: buffer -> [ids, masks]


class VerificationError(AssertionError):
    """A schedule does not compute its collective; the message says where."""


def spec_of(schedule: Schedule) -> Spec:
    """The :class:`Spec` a schedule was built for (from its ``params``)."""
    return Spec(schedule.collective, schedule.world_size, **schedule.params)


def initial_state(schedule: Schedule, spec: Spec | None = None) -> State:
    """Every rank's buffers before the first round: empty, but for its labelled input."""
    spec = spec or spec_of(schedule)
    state = []
    for rank, labels in enumerate(labelled_inputs(spec)):
        bufs = {
            b: [np.full(int(n[rank]), -1, np.int64), np.zeros(int(n[rank]), np.uint64)]
            for b, n in schedule.buffers.items()
        }
        at = 0
        for buf, off, count in spec.record.input_at(spec, rank) if labels else ():
            bufs[buf][0][off : off + count] = labels[0][at : at + count]
            bufs[buf][1][off : off + count] = labels[1][at : at + count]
            at += count
        state.append(bufs)
    return state


def _where(rnd: int, t, what: str) -> str:
    src, dst, sbuf, soff, dbuf, doff, count, red = t
    kind = "reduce" if red else "copy"
    return (
        f"round {rnd}: {kind} of {count} elements from rank {src} {BUFFERS[sbuf]}[{soff}:] "
        f"to rank {dst} {BUFFERS[dbuf]}[{doff}:]: {what}"
    )


def replay(schedule: Schedule, spec: Spec | None = None, check: bool = True) -> Iterator[State]:
    """The state before the first round and after each round, one at a time.

    With ``check`` (as :func:`verify` runs it) a transfer that reads or
    writes outside a buffer, two writes to one element, or a reduction of
    mismatched or overlapping labels raises :class:`VerificationError`;
    without it (to draw a buggy schedule, say) reductions just merge labels.
    A yielded state is the live one: copy what you keep.
    """
    p = schedule.world_size
    state = initial_state(schedule, spec)
    yield state
    for rnd, round_ in enumerate(schedule.rounds):
        reads = []
        for t in round_.transfers():
            src, dst, sbuf, soff, dbuf, doff, count, red = t
            if check:
                if not (0 <= src < p and 0 <= dst < p):
                    raise VerificationError(_where(rnd, t, "rank out of range"))
                for rank, buf, off in ((src, sbuf, soff), (dst, dbuf, doff)):
                    size = len(state[rank][buf][0]) if buf in state[rank] else 0
                    if off < 0 or off + count > size:
                        raise VerificationError(_where(rnd, t, f"outside {BUFFERS[buf]} of {size} elements"))
            ids, masks = state[src][sbuf]
            reads.append((t, ids[soff : soff + count].copy(), masks[soff : soff + count].copy()))
        written: dict[tuple[int, int], np.ndarray] = {}  # (rank, buf) -> 0 free, 1 copied, 2 reduced
        for t, ids, masks in reads:
            src, dst, sbuf, soff, dbuf, doff, count, red = t
            d_ids, d_masks = state[dst][dbuf]
            if check:
                mark = written.setdefault((dst, dbuf), np.zeros(len(d_ids), np.int8))
                region = mark[doff : doff + count]
                if (region == 1).any() or (not red and region.any()):
                    raise VerificationError(_where(rnd, t, "another transfer writes the same elements"))
                region[:] = 2 if red else 1
            if not red:
                d_ids[doff : doff + count], d_masks[doff : doff + count] = ids, masks
                continue
            here_ids, here = d_ids[doff : doff + count], d_masks[doff : doff + count]
            if check:
                if (masks == 0).any() or (here == 0).any():
                    raise VerificationError(_where(rnd, t, "reduces elements that hold no data yet"))
                if (here_ids != ids).any():
                    raise VerificationError(_where(rnd, t, "adds up different elements (misaligned chunks)"))
                if (here & masks).any():
                    raise VerificationError(_where(rnd, t, "counts some rank's contribution twice"))
            d_masks[doff : doff + count] = here | masks
        yield state


def _heard(schedule: Schedule) -> list[int]:
    """For each rank, the set (bit mask) of ranks it has heard from, directly or not."""
    heard = [1 << r for r in range(schedule.world_size)]
    for round_ in schedule.rounds:
        new = list(heard)
        for src, dst in zip(round_.src.tolist(), round_.dst.tolist()):
            new[dst] |= heard[src]
        heard = new
    return heard


def verify(schedule: Schedule, spec: Spec | None = None) -> None:
    """Raise :class:`VerificationError` unless ``schedule`` computes its collective.

    ``spec`` defaults to the one the schedule was built from (its ``params``).
    Works for world sizes up to 64 (one bit per rank).
    """
    p = schedule.world_size
    if p > 64:
        raise ValueError("verify works for world sizes up to 64")
    spec = spec or spec_of(schedule)
    *_, state = replay(schedule, spec)  # the state after the last round
    if not spec.record.carries_data:  # a barrier: every rank must have heard from every rank
        for rank, heard in enumerate(_heard(schedule)):
            if heard != (1 << p) - 1:
                missing = [r for r in range(p) if not heard >> r & 1]
                raise VerificationError(f"barrier: rank {rank} may leave before hearing from ranks {missing}")
    for rank, want in enumerate(labelled_outputs(spec)):
        if want is None:
            continue
        got_ids = np.concatenate(
            [state[rank][b][0][o : o + n] for b, o, n in spec.record.output_at(spec, rank)]
        )
        got = np.concatenate([state[rank][b][1][o : o + n] for b, o, n in spec.record.output_at(spec, rank)])
        ids, masks = want
        bad = np.flatnonzero((got_ids != ids) | (got != masks))
        if len(bad):
            i = int(bad[0])
            have = [r for r in range(p) if int(got[i]) >> r & 1]
            need = [r for r in range(p) if int(masks[i]) >> r & 1]
            raise VerificationError(
                f"{schedule.collective}/{schedule.algorithm} p={p}: rank {rank}'s output element {i} "
                f"holds element {int(got_ids[i])} from ranks {have}, expected element {int(ids[i])} "
                f"from ranks {need} ({len(bad)} elements wrong)"
            )
