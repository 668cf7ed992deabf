"""One rank's call at a sequence number, judged against the call the others made there (rule 2 of :mod:`.rules`).

A training loop repeats itself, so the ranks' shared history says what comes
next: the call that followed the last one the previous time the loop made
it. That tells which of two calls is the expected one when the ranks split
evenly, and what an odd call is: the next call of the loop (the rank skipped
one), the call it has just made (an extra one), another call of the loop (a
different order), a collective the loop does not make, or the same
collective with other arguments.
"""

from __future__ import annotations

from collections import Counter

from . import text

FIELDS = (("count", "sizes"), ("dtype", "dtypes"), ("root", "roots"), ("op", "reduce ops"))


def key(e: dict) -> tuple:
    """What ranks must agree on (not the call site: ranks may call one collective from different lines)."""
    return (e["fn"], e["count"], e["dtype"], e["root"], e["op"])


def next_after(history: list[dict], e: dict) -> tuple[dict | None, set]:
    """The call that followed ``e``'s last time in ``history``, and every call of ``history``."""
    keys = [key(h) for h in history]
    after = None
    for j in range(len(keys) - 2, -1, -1):
        if keys[j] == key(e):
            after = history[j + 1]
            break
    return after, set(keys)


def expected(history: list[dict]) -> tuple | None:
    """The call the loop makes after ``history`` (None when its last call has no earlier match)."""
    if not history:
        return None
    after, _ = next_after(history, history[-1])
    return None if after is None else key(after)


def reference(by_rank: dict[int, dict], history: list[dict]) -> tuple | None:
    """The call the ranks should have made: the loop's next call if a rank made it, else the
    majority's; None when the ranks split evenly with no history to tell."""
    counts = Counter(key(e) for e in by_rank.values()).most_common()
    nxt = expected(history)
    if nxt in dict(counts):
        return nxt
    if len(counts) > 1 and counts[0][1] == counts[1][1]:
        return None
    return counts[0][0]


def verdict(x: dict, e0: dict, history: list[dict]) -> tuple[str, str, str]:
    """What the odd call ``x`` is, where the others called ``e0``: (kind, what the rank did, the clause
    that shows it)."""
    after, seen = next_after([*history, e0], e0)
    if after is not None and key(after) == key(x):
        return (
            "skipped",
            "skipped a collective (or moved it later)",
            f"called {text.call(x)}, the call that comes next",
        )
    if history and key(history[-1]) == key(x):
        return (
            "extra",
            "issued an extra collective",
            f"called {text.call(x)} again, the call it had just made (or its calls are out of order)",
        )
    if key(x) in seen:
        return "order", "issued collectives in a different order", f"called {text.call(x)}"
    if x["fn"] != e0["fn"]:
        return (
            "mismatch",
            "called a different collective",
            f"called {text.call(x)} (a call the others do not make)",
        )
    for field, what in FIELDS:
        if str(x[field]) != str(e0[field]):
            return "mismatch", f"passed mismatched {what}", f"passed {show(x, field)}"
    return "mismatch", "disagrees on the call", f"called {text.call(x)}"


def show(e: dict, field: str) -> str:
    """The value of ``field`` as a mismatch names it: ``1025 float32``, ``root 1``, ``op MAX``."""
    return text.size(e) if field in ("count", "dtype") else f"{field} {e[field]}"


def field_of(x: dict, e0: dict) -> str | None:
    """The first argument on which ``x`` and ``e0`` differ (None: the collective itself)."""
    if x["fn"] != e0["fn"]:
        return None
    return next((f for f, _ in FIELDS if str(x[f]) != str(e0[f])), None)
