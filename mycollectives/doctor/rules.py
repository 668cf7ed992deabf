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
from collections import Counter
from dataclasses import dataclass, field

from . import text
from .load import Dump, Group

FIELDS = (("count", "sizes"), ("dtype", "dtypes"), ("root", "roots"), ("op", "reduce ops"))


@dataclass
class Diagnosis:
    """What the doctor found: ``kind``, the ranks to blame, the sequence number, and one line."""

    kind: str  # deadlock, died, crashed, skipped, order, mismatch, straggler, unmatched, stuck, ok, empty
    ranks: list[int]
    seq: int | None
    line: str
    group: str = "default"
    details: list[str] = field(default_factory=list)


def _groups(dumps: dict[int, Dump]) -> list[tuple[tuple, dict[int, Group]]]:
    """Every group, with each rank's record of it (the default group first)."""
    out: dict[tuple, dict[int, Group]] = {}
    for rank, d in dumps.items():
        for key, g in d.groups.items():
            out.setdefault(key, {})[rank] = g
    return sorted(out.items(), key=lambda kv: (kv[0][0] not in ("default", "local world"), kv[0]))


def _where(g_name: str, multi: bool) -> str:
    return f" in group {g_name}" if multi else ""


def deadlock(dumps: dict[int, Dump]) -> Diagnosis | None:
    """Rule 1: a cycle of waits with a point-to-point call in it."""
    waits = {}
    for r, d in dumps.items():
        found = d.blocked()
        if found is not None and found[1]["peer"] is not None:
            g, e = found
            peer = e["peer"] if e["kind"] == "p2p" else g.ranks[e["peer"]]
            waits[r] = (peer if e["kind"] == "p2p" else peer, g, e)
    for start in sorted(waits):
        path, r = [], start
        while r in waits and r not in path:
            path.append(r)
            r = waits[r][0]
        if r != start or len(path) < 2 or not any(waits[x][2]["kind"] == "p2p" for x in path):
            continue
        parts = []
        for x in path:
            g, e = waits[x][1], waits[x][2]
            if e["kind"] == "p2p":
                parts.append(f"rank {x} waits in {text.p2p(e)}")
            else:
                parts.append(f"rank {x} waits in {e['fn']} seq {e['seq']} for rank {waits[x][0]}")
        first = waits[path[0]][2]
        line = f"deadlock between point-to-point calls: {'; '.join(parts)}; neither can go on"
        return Diagnosis("deadlock", sorted(path), first["seq"], line)
    return None


def _missing(r: int, dumps: dict[int, Dump], k: int, present: list[int], g_name: str, e: dict, multi: bool):
    """Why rank ``r`` has no record of seq ``k`` that ranks ``present`` have."""
    call = f"seq {k} ({text.call(e)}){_where(g_name, multi)}"
    them = text.ranks(present)
    d = dumps.get(r)
    if d is None:
        return "died", (
            f"rank {r} died: it left no flight record (killed, or stuck in native code) "
            f"and {them} lost it at {call}"
        )
    last = _last_seq(d, g_name)
    after = f"after seq {last}" if last is not None else "before its first collective"
    if d.exit_error:
        return "crashed", f"rank {r} crashed {after}: {d.exit_error}; {them} wait for it at {call}"
    if d.reason == "exit":
        return "skipped", (
            f"rank {r} skipped a collective: it finished {after} while {them} wait for it at {call}"
        )
    blocked = d.blocked()
    if blocked is not None and blocked[0].name != g_name:
        g2, e2 = blocked
        return "order", (
            f"rank {r} waits in {e2['fn']} seq {e2['seq']} of group {g2.name} while {them} wait for it "
            f"at {call}: the ranks call collectives on different groups in a different order"
        )
    in_dist = text.in_torch_distributed(d.stack)
    if in_dist is not None:
        return "skipped", (
            f"rank {r} skipped a collective: it is past it, in torch.distributed's {in_dist[2]}(), "
            f"while {them} wait for it at {call}"
        )
    here = text.user_frame(d.stack)
    if here is not None or d.stack:
        idle = _idle(d)
        at = f" at {text.frame(here)}" if here else ""
        return "straggler", (
            f"rank {r} is a straggler: still in its own code{at}{idle} while {them} wait for it at {call}"
        )
    return "skipped", f"rank {r} never called {call} that {them} called; its last call was seq {last}"


def _idle(d: Dump) -> str:
    done = [e["t_done"] for g in d.groups.values() for e in g.collectives.values() if e["t_done"]]
    return f", {d.time - max(done):.1f} s after its last collective" if done else ""


def _last_seq(d: Dump, g_name: str) -> int | None:
    for g in d.groups.values():
        if g.name == g_name and g.collectives:
            return max(g.collectives)
    return None


def _key(e: dict) -> tuple:
    """What ranks must agree on (not the call site: ranks may call one collective from different lines)."""
    return (e["fn"], e["count"], e["dtype"], e["root"], e["op"])


def _next_after(history: list[dict], e: dict) -> tuple[dict | None, set]:
    """The call that followed ``e``'s last time in ``history``, and every call of ``history``."""
    keys = [_key(h) for h in history]
    after = None
    for j in range(len(keys) - 2, -1, -1):
        if keys[j] == _key(e):
            after = history[j + 1]
            break
    return after, set(keys)


def _disagree(k: int, by_rank: dict[int, dict], history: list[dict], g_name: str, multi: bool):
    """Different calls at seq ``k``: a skipped one, another order, or different arguments."""
    where = _where(g_name, multi)
    keys = Counter(_key(e) for e in by_rank.values())
    if len(keys) == 1:
        return None
    major = keys.most_common(1)[0][0]
    odd = sorted(r for r, e in by_rank.items() if _key(e) != major)
    rest = sorted(set(by_rank) - set(odd))
    e0, x = by_rank[rest[0]], by_rank[odd[0]]
    after, seen = _next_after([*history, e0], e0)
    expected = f"{text.ranks(rest)} called {text.call(e0)}"
    if after is not None and _key(after) == _key(x) and len(odd) == 1:
        line = (
            f"rank {odd[0]} skipped a collective (or moved it later): at seq {k}{where} {expected}, "
            f"and rank {odd[0]} called {text.call(x)}, the call that comes next"
        )
        return Diagnosis("skipped", odd, k, line, g_name)
    if _key(x) in seen or x["fn"] != e0["fn"]:
        calls = "; ".join(f"rank {r} called {text.call(by_rank[r])}" for r in odd)
        known = "" if _key(x) in seen else " (a call the others do not make here)"
        line = f"ranks issued collectives in a different order: at seq {k}{where} {calls}{known}, where {expected}"
        return Diagnosis("order", odd, k, line, g_name)
    for field_, what in FIELDS:
        if str(x[field_]) != str(e0[field_]):
            show = text.size if field_ in ("count", "dtype") else (lambda e, f=field_: f"{f} {e[f]}")
            passed = "; ".join(f"rank {r} passed {show(by_rank[r])}" for r in odd)
            line = (
                f"mismatched {what} at seq {k} ({e0['fn']} at {text.site(e0)}){where}: {passed}, "
                f"{text.ranks(rest)} passed {show(e0)}"
            )
            return Diagnosis("mismatch", odd, k, line, g_name)
    return None


def _late(k: int, by_rank: dict[int, dict], dumps, g_name: str, multi: bool) -> Diagnosis | None:
    """All ranks reached seq ``k``, some failed: a dead peer, or one rank far later than the rest."""
    failed = {r: e for r, e in by_rank.items() if e["state"] in ("failed", "running", "posted")}
    if not failed:
        return None
    e0 = next(iter(by_rank.values()))
    call = f"seq {k} ({text.call(e0)}){_where(g_name, multi)}"
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
    groups = _groups(dumps)
    multi = len(groups) > 1
    found = []
    for (name, members), by_rank in groups:
        absent = [r for r in members if r not in dumps]  # no record at all: known only by the others
        seqs = [g.collectives for g in by_rank.values() if g.collectives]
        if not seqs:
            continue
        start, stop = max(min(c) for c in seqs), max(max(c) for c in seqs)
        for k in range(start, stop + 1):
            have = {r: g.collectives[k] for r, g in by_rank.items() if k in g.collectives}
            lacking = [r for r in by_rank if r not in have]
            if not have:
                continue
            e = next(iter(have.values()))
            if lacking and len(lacking) > len(have):  # the odd ones are those that called it
                line = (
                    f"{text.ranks(have)} called {text.call(e)} at seq {k}{_where(name, multi)}, "
                    f"which {text.ranks(lacking)} never called (a call the others skip, or an extra one)"
                )
                found.append(Diagnosis("order", sorted(have), k, line, name))
                break
            if lacking:
                worst = None
                for r in lacking:
                    kind, line = _missing(r, dumps, k, sorted(have), name, e, multi)
                    if worst is None or kind == "died":
                        worst = Diagnosis(kind, [r], k, line, name)
                    elif worst.kind == kind:
                        worst.ranks.append(r)
                found.append(worst)
                break
            ref = by_rank[next(iter(have))]
            history = [ref.collectives[j] for j in range(start, k) if j in ref.collectives]
            diag = _disagree(k, have, history, name, multi)
            if diag is None and absent and any(x["state"] != "completed" for x in have.values()):
                kind, line = _missing(absent[0], dumps, k, sorted(have), name, e, multi)
                diag = Diagnosis(kind, absent, k, line, name)
            diag = diag or _late(k, have, dumps, name, multi)
            if diag is not None:
                found.append(diag)
                break
    if not found:
        return None
    return min(found, key=lambda d: _when(d, dumps))


def _when(d: Diagnosis, dumps) -> float:
    """When the group's trouble started: the earliest post of its sequence number."""
    ts = [
        g.collectives[d.seq]["t_posted"]
        for dump in dumps.values()
        for g in dump.groups.values()
        if g.name == d.group and d.seq in g.collectives
    ]
    return min(ts, default=float("inf"))
