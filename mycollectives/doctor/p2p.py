"""Rules 1 and 3 of :mod:`.rules`: point-to-point calls that wait on each other, or on nothing.

Sends and receives have numbers of their own, so they are matched by
counting: rank r's n-th send to q is received by q's n-th receive from r.
A rank blocked in its n-th send to q while q has posted fewer receives from
it waits for a call q never made; one whose match differs in size or dtype
passed mismatched messages.
"""

from __future__ import annotations

from . import calls, text
from .diagnosis import Diagnosis, unfinished
from .load import UNKNOWN, Dump, Group


def _peer(g: Group, e: dict) -> int:
    """The job's rank of ``e``'s peer (entries name it by its rank in the group)."""
    p = e["peer"] if e["peer"] is not None else e["root"]
    return g.ranks[p] if isinstance(p, int) and 0 <= p < len(g.ranks) else p


def _p2p_wait(d: Dump) -> tuple[Group, dict] | None:
    found = d.blocked()
    return found if found is not None and found[1]["kind"] == "p2p" else None


def deadlock(dumps: dict[int, Dump]) -> Diagnosis | None:
    """Rule 1: a cycle of ranks, each blocked in a send or receive with the next."""
    waits = {r: (_peer(*w), w[1]) for r, d in dumps.items() if (w := _p2p_wait(d)) is not None}
    for start in sorted(waits):
        path, r = [], start
        while r in waits and r not in path:
            path.append(r)
            r = waits[r][0]
        if r != start or len(path) < 2 or _each_others_match(path, waits):
            continue
        parts = [f"rank {x} waits in {text.p2p(waits[x][1])}" for x in path]
        line = f"deadlock between point-to-point calls: {'; '.join(parts)}; neither can go on"
        return Diagnosis("deadlock", sorted(path), waits[path[0]][1]["seq"], line)
    return None


def _each_others_match(path: list[int], waits: dict) -> bool:
    """Two ranks in a send and a receive with each other: no deadlock (their sizes may differ)."""
    return len(path) == 2 and {waits[x][1]["fn"] for x in path} == {"send", "recv"}


def _counted(g: Group) -> bool:
    """Whether ``g`` kept every point-to-point call from the first (the ring did not wrap)."""
    return not g.p2p or min(x["seq"] for x in g.p2p) == 0


def unmatched(dumps: dict[int, Dump], dead_peers: bool = True) -> Diagnosis | None:
    """Rule 3: a rank blocked in a send or receive that its peer never posted, or posted with another
    size (``dead_peers`` False: only where the peer left a record; rule 2 names a dead one)."""
    for r, d in sorted(dumps.items()):
        found = _p2p_wait(d)
        if found is None:
            continue
        g, e = found
        q = _peer(g, e)
        peer = dumps.get(q)
        if peer is None or peer.reason in UNKNOWN:
            if dead_peers:
                why = " left no flight record (it died)" if peer is None else text.unknown(peer)
                line = f"rank {r} waits in {text.p2p(e)}, which rank {q} never matched: rank {q}{why}"
                return Diagnosis("unmatched", [r, q], e["seq"], line, g.name)
            continue
        mine = [x for x in g.p2p if x["fn"] == e["fn"] and _peer(g, x) == q and x["seq"] <= e["seq"]]
        pg = peer.groups.get(g.key)
        want = "recv" if e["fn"] == "send" else "send"
        theirs = [x for x in (pg.p2p if pg else []) if x["fn"] == want and _peer(pg, x) == r]
        if pg is not None and _counted(g) and _counted(pg) and len(theirs) >= len(mine):
            match = theirs[len(mine) - 1]
            if (match["count"], match["dtype"]) == (e["count"], e["dtype"]):
                continue  # posted and alike: not this rule's fault
            send, recv = (e, match) if e["fn"] == "send" else (match, e)
            s, t = (r, q) if e["fn"] == "send" else (q, r)
            line = (
                f"mismatched point-to-point sizes: rank {s} sends {text.size(send)} to rank {t} (p2p #{send['seq']}"
                f" at {text.site(send)}), and rank {t} receives {text.size(recv)} (p2p #{recv['seq']} at "
                f"{text.site(recv)})"
            )
            return Diagnosis("mismatch", sorted([r, q]), e["seq"], line, g.name)
        skipped = _skipped_for(d, peer)
        if skipped is not None:
            g2, x = skipped
            line = (
                f"rank {r} skipped a collective: it did not call {x['fn']} seq {x['seq']} of group {g2.name}, "
                f"where rank {q} waits for it, and went on to {text.p2p(e)}, which rank {q} never matched"
            )
            return Diagnosis("skipped", [r], x["seq"], line, g2.name)
        line = f"rank {r} waits in {text.p2p(e)}, which rank {q} never matched: rank {q} {_state(peer)}"
        return Diagnosis("unmatched", [r, q], e["seq"], line, g.name)
    return None


def _skipped_for(d: Dump, peer: Dump) -> tuple[Group, dict] | None:
    """The collective ``peer`` waits in, if it is the call ``d``'s own loop makes next and ``d`` waits in
    a later call of its loop instead (``d`` skipped it)."""
    stuck = unfinished(peer)
    if stuck is None or stuck[1]["kind"] == "p2p":
        return None
    mine = sorted(
        (
            dict(e, fn=(g.name, e["kind"], e["fn"]))
            for g in d.groups.values()
            for e in [*g.collectives.values(), *g.p2p]
        ),
        key=lambda e: e["t_posted"],
    )
    g2, x = stuck
    _, seen = calls.next_after(mine[:-1], mine[-1])
    ours = calls.key(mine[-1]) in seen  # a call of the loop, made early; else a call the loop never makes
    if ours and calls.expected(mine[:-1]) == calls.key(dict(x, fn=(g2.name, x["kind"], x["fn"]))):
        return stuck
    return None


def _state(peer: Dump) -> str:
    stuck = unfinished(peer)
    if stuck is not None:
        g, x = stuck
        if x["kind"] == "p2p":
            return f"waits in {text.p2p(x)}"
        return f"waits in {x['fn']} seq {x['seq']} of group {g.name} ({text.call(x)})"
    if peer.reason == "exit":
        return "finished without matching it"
    here = text.user_frame(peer.stack)
    return f"is at {text.frame(here)}" if here else "never posted the matching call"
