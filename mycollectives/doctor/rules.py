"""What went wrong, from every rank's flight record: the rules, in the order the doctor tries them.

1. A cycle of ranks each waiting on the next, at least one of them in a
   point-to-point call: a deadlock.
2. Per group, the first sequence number at which the ranks' records
   disagree (as PyTorch's flight-recorder analyzer matches them): different
   collectives, sizes, dtypes, roots or ops (the minority is named); or ranks
   missing, told apart by what their own records say: none at all (died),
   an uncaught exception (crashed), exited or waiting outside the package
   (skipped the collective), still in their own code (a straggler); or all
   present, one much later than the rest (a straggler the others gave up on).
3. A rank blocked in a point-to-point call its peer never matched.
4. Nothing failed: a rank that arrives last at most collectives (a straggler).
"""

from __future__ import annotations

import statistics

from . import calls, text
from .absent import crossed, missing, several_not_reached
from .diagnosis import Diagnosis, groups, where
from .load import UNKNOWN, Dump
from .torchlate import torch_late

__all__ = ["Diagnosis", "align"]
HISTORY = 2000  # the calls before a disagreement that tell the loop's next call


def _disagree(k: int, by_rank: dict[int, dict], history: list[dict], g_name: str, multi: bool):
    """Different calls at seq ``k``: each odd rank skipped one, made an extra one, called another call
    of the loop or another collective, or passed other arguments (:mod:`.calls`)."""
    here = where(g_name, multi)
    if len({calls.key(e) for e in by_rank.values()}) == 1:
        return None
    right = calls.reference(by_rank, history)
    if right is None:  # an even split, and no earlier step of the loop to tell which half is right
        shown = "; ".join(f"rank {r} called {text.call(e)}" for r, e in sorted(by_rank.items()))
        return Diagnosis("mismatch", sorted(by_rank), k, f"ranks disagree at seq {k}{here}: {shown}", g_name)
    odd = sorted(r for r, e in by_rank.items() if calls.key(e) != right)
    rest = sorted(set(by_rank) - set(odd))
    e0 = by_rank[rest[0]]
    found = {r: calls.verdict(by_rank[r], e0, history) for r in odd}
    fields = {calls.field_of(by_rank[r], e0) for r in odd}
    if {v[0] for v in found.values()} == {"mismatch"} and len(fields) == 1 and None not in fields:
        (f,) = fields  # one argument differs: name it, and what each side passed
        passed = "; ".join(f"rank {r} passed {calls.show(by_rank[r], f)}" for r in odd)
        what = dict(calls.FIELDS)[f]
        line = (
            f"mismatched {what} at seq {k} ({e0['fn']} at {text.site(e0)}){here}: {passed}, "
            f"{text.ranks(rest)} passed {calls.show(e0, f)}"
        )
        return Diagnosis("mismatch", odd, k, line, g_name)
    kinds, did = {v[0] for v in found.values()}, {v[1] for v in found.values()}
    if len(did) == 1:
        kind, head = kinds.pop(), f"{text.ranks(odd)} {did.pop()}"
        parts = "; ".join(f"rank {r} {v[2]}" for r, v in found.items())
    else:
        kind, head = "several", f"{text.ranks(odd)} went wrong in different ways"
        parts = "; ".join(f"rank {r} {v[1]}: it {v[2]}" for r, v in found.items())
    line = f"{head}: at seq {k}{here} {text.ranks(rest)} called {text.call(e0)}, and {parts}"
    return Diagnosis(kind, odd, k, line, g_name)


def _late(k: int, by_rank: dict[int, dict], dumps, g_name: str, multi: bool) -> Diagnosis | None:
    """All ranks reached seq ``k``, some failed: a dead peer, or one rank far later than the rest."""
    failed = {r: e for r, e in by_rank.items() if e["state"] in ("failed", "running", "posted")}
    if not failed:
        return None
    e0 = next(iter(by_rank.values()))
    call = f"seq {k} ({text.call(e0)}){where(g_name, multi)}"
    if all(dumps[r].source == "torch" for r in by_rank if r in dumps):
        return torch_late(k, by_rank, failed, call, g_name)
    posted = {r: e["t_posted"] for r, e in by_rank.items()}
    last = max(posted, key=posted.get)
    others = [t for r, t in posted.items() if r != last]
    lag = posted[last] - statistics.median(others) if others else 0.0
    timeouts = [
        e for r, e in failed.items() if r != last and (e["error"] or "").startswith("CollectiveTimeout")
    ]
    waited = [(e["t_done"] or e["t_posted"]) - e["t_posted"] for e in timeouts]
    if timeouts and lag > 0.5 * max(waited):
        rest = sorted(set(by_rank) - {last})
        line = (
            f"rank {last} is a straggler: it reached {call} {lag:.1f} s after {text.ranks(rest)}, "
            f"which gave up waiting for it after {max(waited):.1f} s"
        )
        return Diagnosis("straggler", [last], k, line, g_name)
    waits = sorted({(r, e["peer"], e["what"]) for r, e in failed.items() if e["peer"] is not None})
    shown = ", ".join(f"rank {r} on rank {p}" for r, p, _ in waits) or "no rank names a peer"
    line = f"{text.ranks(failed)} failed in {call}, all ranks present and agreeing; waiting: {shown}"
    return Diagnosis("stuck", sorted(failed), k, line, g_name, [e["error"] or "" for e in failed.values()])


def align(dumps: dict[int, Dump]) -> Diagnosis | None:
    """Rule 2: the first sequence number at which the ranks' records part."""
    every = groups(dumps)
    multi = len(every) > 1
    found = []
    for (name, members), by_rank in every:
        absent = [r for r in members if r not in dumps or dumps[r].reason in UNKNOWN]  # known by the others
        seqs = [g.collectives for g in by_rank.values() if g.collectives]
        if not seqs:
            continue
        start, stop = max(min(c) for c in seqs), max(max(c) for c in seqs)
        last = {r: max(g.collectives) for r, g in by_rank.items() if g.collectives}
        for k in range(start, stop + 1):
            have = {r: g.collectives[k] for r, g in by_rank.items() if k in g.collectives}
            # its record lacks k; one that holds a later call has passed k (a hole in its record is no clue)
            lacking = [r for r in members if r not in have and r not in absent and last.get(r, k) <= k]
            if not have:
                continue
            e = next(iter(have.values()))
            if not lacking and not absent and len({calls.key(x) for x in have.values()}) == 1:
                if all(x["state"] == "completed" for x in have.values()):
                    continue  # the common case, kept linear: the history is read only where ranks part
            ref = by_rank[next(iter(have))]
            history = [ref.collectives[j] for j in range(max(start, k - HISTORY), k) if j in ref.collectives]
            if lacking and _extra(have, lacking, history, dumps):
                line = (
                    f"{text.ranks(have)} issued an extra collective: {text.call(e)} at seq {k}"
                    f"{where(name, multi)}, which {text.ranks(lacking)} never called"
                )
                found.append(Diagnosis("extra", sorted(have), k, line, name))
                break
            if lacking:
                worst = None
                for r in [*lacking, *absent]:  # a dead rank is the likelier cause
                    diag = missing(r, dumps, k, sorted(have), name, e, multi)
                    if worst is None or (diag.kind == "died" and worst.kind != "died"):
                        worst = diag
                    elif worst.kind == diag.kind:
                        worst.ranks.append(r)
                if len(worst.ranks) > 1 and worst.kind != "died" and dumps[worst.ranks[0]].source == "torch":
                    worst = several_not_reached(worst.ranks, dumps, k, sorted(have), name, e, multi)
                found.append(worst)
                break
            diag = _disagree(k, have, history, name, multi)
            if diag is None and absent and any(x["state"] != "completed" for x in have.values()):
                diag = missing(absent[0], dumps, k, sorted(have), name, e, multi)
                diag.ranks = absent
            diag = diag or _late(k, have, dumps, name, multi)
            if diag is not None:
                found.append(diag)
                break
    if not found:
        return None
    real = [d for d in found if d.waits_in is None]  # not just "waits in another group"
    if not real:
        return crossed(found, dumps) or min(found, key=lambda d: _when(d, dumps))
    waited_on = [d for d in real if any(x.waits_in and x.waits_in[0] == d.group for x in found)]
    return min(waited_on or real, key=lambda d: _when(d, dumps))


def _extra(have: dict, lacking: list[int], history: list[dict], dumps: dict[int, Dump]) -> bool:
    """Whether the ranks that made this call made one too many (rather than the others skipping it):
    they are fewer, or as many and the call is not the loop's next while the others have finished."""
    nxt = calls.expected(history)
    done = all(r in dumps and dumps[r].reason == "exit" and not dumps[r].exit_error for r in lacking)
    is_next = nxt is not None and nxt == calls.key(next(iter(have.values())))
    if len(lacking) > len(have):  # unless it is the loop's next call and the others were stopped short of it
        return done or not is_next
    return len(lacking) == len(have) and done and nxt is not None and not is_next


def _when(d: Diagnosis, dumps) -> float:
    """When the group's trouble started: the earliest post of its sequence number."""
    ts = [
        g.collectives[d.seq]["t_posted"]
        for dump in dumps.values()
        for g in dump.groups.values()
        if g.name == d.group and d.seq in g.collectives
    ]
    return min(ts, default=float("inf"))
