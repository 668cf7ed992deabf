"""Rules 4 and 5 of :mod:`.rules`: a rank that did not finish, and a straggler in a run that finished.

A straggler that does not hang the job shows in the timestamps: at each
collective it is the last rank to arrive, and the others wait for it. Times
are each host's wall clock, so across hosts they carry the clocks' skew
(usually well under a millisecond with NTP; the doctor asks for lags of
tens of milliseconds).
"""

from __future__ import annotations

import statistics
from collections import Counter

from . import text
from .diagnosis import Diagnosis, groups, unfinished
from .load import UNKNOWN, Dump

WINDOW = 50  # the last collectives judged
MIN_LAG_S = 0.02


def unfinished_rank(dumps: dict[int, Dump]) -> Diagnosis | None:
    """Rule 4: every call the ranks share completed, some ranks finished, and one did not: it hangs in
    its own code (a signal stopped it there), crashed after its last collective, or died (no record)."""
    finished = sorted(r for r, d in dumps.items() if _past(d))
    if not finished:
        return None
    them = f"while {text.ranks(finished)} finished their collectives"
    for r in sorted({r for (_, m), _ in groups(dumps) for r in m} | set(dumps)):
        d = dumps.get(r)
        if d is None:
            return Diagnosis("died", [r], None, f"rank {r} died: it left no flight record (killed?) {them}")
        if r in finished or d.reason in UNKNOWN or unfinished(d) is not None:
            continue
        last = max(
            ((e["t_posted"], g.name, k) for g in d.groups.values() for k, e in g.collectives.items()),
            default=None,
        )
        seq, group = (last[2], last[1]) if last else (None, "default")
        after = "before its first collective"
        if last:
            after = (
                f"after its last collective (seq {seq}{'' if group == 'default' else ' of group ' + group})"
            )
        if d.exit_error:
            line = f"rank {r} crashed {after}: {d.exit_error.splitlines()[0]}; {them}"
            return Diagnosis("crashed", [r], seq, line, group)
        here = text.user_frame(d.stack)
        at = f" at {text.frame(here)}" if here else ""
        line = f"rank {r} hangs in its own code{at}, {after}, {them} (it was stopped by {d.reason})"
        return Diagnosis("hang", [r], seq, line, group)
    return None


def _past(d: Dump) -> bool:
    """Whether rank ``d`` is done with its collectives: it exited, or waits in torch.distributed's own
    code (a barrier at the end, say) with no call of the package unfinished."""
    if d.reason == "exit":
        return not d.exit_error
    return unfinished(d) is None and text.in_torch_distributed(d.stack) is not None


def straggler(dumps: dict[int, Dump]) -> Diagnosis | None:
    """Rule 4: in collectives every rank completed, the others keep waiting for one rank.

    At each collective the last rank to arrive makes the others wait (its
    arrival less the others' median). A straggler is the rank that caused most
    of that waiting, late by at least ``MIN_LAG_S`` at three or more
    collectives and at least twice as often as any other rank.
    """
    for (name, members), by_rank in groups(dumps):
        if len(by_rank) < 2 or set(by_rank) != set(members):
            continue
        common = set.intersection(*(set(g.collectives) for g in by_rank.values()))
        done = (k for k in common if all(g.collectives[k]["state"] == "completed" for g in by_rank.values()))
        seqs = sorted(done)[-WINDOW:]
        caused, late = Counter(), {r: [] for r in by_rank}
        for k in seqs:
            posted = {r: g.collectives[k]["t_posted"] for r, g in by_rank.items()}
            last = max(posted, key=posted.get)
            lag = posted[last] - statistics.median(t for r, t in posted.items() if r != last)
            caused[last] += lag
            if lag >= MIN_LAG_S:
                late[last].append((lag, k))
        if not seqs or not caused:
            continue
        r, total = caused.most_common(1)[0]
        others = max((len(v) for q, v in late.items() if q != r), default=0)
        if len(late[r]) >= 3 and len(late[r]) >= 2 * others and total >= 0.6 * sum(caused.values()):
            lag, k = max(late[r])
            e = by_rank[r].collectives[k]
            line = (
                f"rank {r} is a straggler: the others waited {total:.2f} s for it over the last {len(seqs)} "
                f"collectives (seq {seqs[0]}-{seqs[-1]}); it arrived last, a median "
                f"{statistics.median(x for x, _ in late[r]) * 1e3:.0f} ms late, at {len(late[r])} of them "
                f"(most, {lag * 1e3:.0f} ms, at seq {k}: {e['fn']} at {text.site(e)})"
            )
            return Diagnosis("straggler", [r], k, line, name)
    return None


def healthy(dumps: dict[int, Dump]) -> Diagnosis:
    """Nothing found: say what was checked."""
    parts = []
    for (name, _), by_rank in groups(dumps):
        n = [len(g.collectives) for g in by_rank.values()]
        last = max((max(g.collectives) for g in by_rank.values() if g.collectives), default=-1)
        first = min((min(g.collectives) for g in by_rank.values() if g.collectives), default=0)
        first = (
            0 if first == 0 or all(d.source != "torch" for d in dumps.values()) else 1
        )  # PyTorch counts from 1
        seqs = (
            f"agree on seq {first}-{last} ({max(n, default=0)} kept)"
            if last >= 0
            else "recorded no collectives"
        )
        parts.append(f"group {name}: {text.ranks(by_rank)} {seqs}")
    if not parts:
        parts.append(f"{text.ranks(dumps)} recorded no collectives")
    missing = sorted({r for (_, members), _ in groups(dumps) for r in members} - set(dumps))
    gone = f"; no record from {text.ranks(missing)}" if missing else ""
    if any(d.source == "torch" for d in dumps.values()):
        gone += " (PyTorch's dumps record no roots or reduce ops: a mismatch in those is not seen)"
    return Diagnosis("ok", [], None, f"no fault found: {'; '.join(parts)}{gone}")
