"""The messages an exercise's algorithm must send, checked against a local world's trace.

A collective can compute the right result without sending what its algorithm
sends: a solution that passes the data through shared Python state (a list
every rank's thread can read) moves no message at all. So the checks of the
exercises that ask for one algorithm also read the trace of every run
(:attr:`~mycollectives.transport.LocalWorld.trace`: source, destination and
bytes of each message) and compare it with the algorithm's pattern. Each
function here takes the case and the trace's events and returns what is
wrong, or ``None``; :func:`~.check.check_collective` takes one as
``messages=``.

A pattern may run in either direction round the ranks (Bruck's to
``rank - d`` or to ``rank + d``): its mirror image is accepted too.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

import torch

from .expected import Case

#: A checker of the trace: (case, events) -> what is wrong, or None.
Pattern = Callable[[Case, Sequence], "str | None"]


def _itemsize(case: Case) -> int:
    return torch.empty(0, dtype=case.dtype).element_size()


def _sent(events: Sequence, with_bytes: bool = True) -> Counter:
    return Counter((e.src, e.dst, e.nbytes) if with_bytes else (e.src, e.dst) for e in events)


def _mirror(want: Counter, p: int) -> Counter:
    """The same pattern the other way round the ranks: a message r -> r + k becomes r -> r - k."""
    out: Counter = Counter()
    for key, n in want.items():
        src, dst, *rest = key
        out[(src, (2 * src - dst) % p, *rest)] += n
    return out


def _describe(got: Counter, want: Counter, p: int) -> str:
    missing, extra = want - got, got - want
    parts = [f"{sum(got.values())} messages sent, {sum(want.values())} expected at world size {p}"]
    if missing:
        src, dst, *rest = sorted(missing)[0]
        size = f" of {rest[0]} bytes" if rest else ""
        parts.append(f"e.g. no message{size} from rank {src} to rank {dst}")
    if extra:
        src, dst, *rest = sorted(extra)[0]
        size = f" of {rest[0]} bytes" if rest else ""
        parts.append(f"an unexpected one{size} from rank {src} to rank {dst}")
    return "; ".join(parts) + " (data must travel in messages, not through shared Python state)"


def _exactly(want: Counter, events: Sequence, p: int, with_bytes: bool = True) -> str | None:
    got = _sent(events, with_bytes)
    if got in (want, _mirror(want, p)):
        return None
    return _describe(got, want, p)


def bruck(case: Case, events: Sequence) -> str | None:
    """Bruck's all-gather: in the step of distance d = 1, 2, 4, ... every rank sends its first
    min(d, p - d) blocks to rank - d (or, mirrored, to rank + d)."""
    p, block = case.p, case.count * _itemsize(case)
    want: Counter = Counter()
    d = 1
    while d < p:
        for r in range(p):
            want[(r, (r - d) % p, min(d, p - d) * block)] += 1
        d *= 2
    return _exactly(want, events, p)


def dissemination(case: Case, events: Sequence) -> str | None:
    """The dissemination barrier: in the round of distance d = 1, 2, 4, ... every rank sends one
    token to rank + d (or, mirrored, to rank - d); the token's size is free."""
    p, want = case.p, Counter()
    d = 1
    while d < p:
        for r in range(p):
            want[(r, (r + d) % p)] += 1
        d *= 2
    return _exactly(want, events, p, with_bytes=False)


def binomial_tree(case: Case, events: Sequence) -> str | None:
    """A broadcast tree: p - 1 messages of the whole tensor, each rank but the root receiving
    exactly one, each sent by a rank that already held the data (the root, or a rank that had
    received it). The page's ``sends_per_rank`` caps each rank's sends besides."""
    p, size = case.p, case.count * _itemsize(case)
    got = sorted(events, key=lambda e: e.t_send)
    received = Counter(e.dst for e in got)
    wrong = [r for r in range(p) if received[r] != (r != case.root)]
    if len(got) != p - 1 or wrong or any(e.nbytes != size for e in got):
        return (
            f"{len(got)} messages sent, p - 1 = {p - 1} of {size} bytes expected, each rank but the root "
            f"receiving one (rank {wrong[0] if wrong else '?'} does not); data must travel in messages, "
            "not through shared Python state"
        )
    has = {case.root}
    for e in got:
        if e.src not in has:
            return f"rank {e.src} sent to rank {e.dst} before it had received the data"
        has.add(e.dst)
    return None


def ring_all_reduce(case: Case, events: Sequence) -> str | None:
    """The ring all-reduce: every rank sends 2(p - 1) chunks, all to the same neighbour (rank + 1,
    or rank - 1 for every rank), together 2(p - 1)/p of the vector give or take a chunk."""
    p, size = case.p, _itemsize(case)
    n, chunk = case.count * size, -(-case.count // p) * size if p else 0  # the largest chunk, in bytes
    by_rank: dict[int, list] = {r: [e for e in events if e.src == r] for r in range(p)}
    for step in (1, -1):
        if all({e.dst for e in sent} <= {(r + step) % p} for r, sent in by_rank.items()):
            break
    else:
        return "every rank must send only to its neighbour on the ring (all to rank + 1, or all to rank - 1)"
    for r, sent in by_rank.items():
        total = sum(e.nbytes for e in sent)
        if len(sent) != 2 * (p - 1) or not 2 * (n - chunk) <= total <= 2 * n:
            return (
                f"rank {r} sent {len(sent)} messages of {total} bytes in all; the ring sends 2(p - 1) = "
                f"{2 * (p - 1)} chunks, about 2(p - 1)/p of the {n} bytes (data must travel in messages, "
                "not through shared Python state)"
            )
    return None


def every_pair(case: Case, events: Sequence) -> str | None:
    """The all-to-all of chapter 2: every rank sends one message of its block to every other rank."""
    p, block = case.p, case.count * _itemsize(case)
    want = Counter({(r, d, block): 1 for r in range(p) for d in range(p) if d != r})
    return _exactly(want, events, p)


__all__ = ["Pattern", "binomial_tree", "bruck", "dissemination", "every_pair", "ring_all_reduce"]
