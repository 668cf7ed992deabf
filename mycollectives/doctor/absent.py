"""Why a rank has no record of a call the others made (rule 2 of :mod:`.rules`), from its own record.

No file at all: it died. A call of its own that failed or is still going,
in another group or point to point: it is stuck there (and the doctor looks
at that group). An uncaught exception in its own code: it crashed; one
raised inside ``torch.distributed``, or an exit: it went past the call. Its
main thread in its own code: a straggler, or a rank hung there.
"""

from __future__ import annotations

from . import calls, native, text
from .diagnosis import Diagnosis, unfinished, where
from .load import UNKNOWN, Dump

ROOTED = {"broadcast", "_broadcast_oop", "reduce", "_reduce_oop", "scatter", "gather"}


def missing(r: int, dumps: dict[int, Dump], k: int, present: list[int], g_name: str, e: dict, multi: bool):
    """Why rank ``r`` has no record of seq ``k`` (call ``e`` of group ``g_name``) that ranks ``present`` have."""
    call = f"seq {k} ({text.call(e)}){where(g_name, multi)}"
    them = text.ranks(present)

    def say(kind: str, line: str, waits_in=None) -> Diagnosis:
        return Diagnosis(kind, [r], k, line, g_name, waits_in=waits_in)

    d = dumps.get(r)
    if d is None:
        return say(
            "died",
            f"rank {r} died: it left no flight record (killed, or stuck in native code) "
            f"and {them} lost it at {call}",
        )
    if d.source == "torch" and d.reason not in UNKNOWN:
        return _not_reached(r, d, k, them, call, g_name, say)
    if d.reason == native.NATIVE:  # it died in native code: its rank{R}.native says where
        line, at = native.said(d, dumps)
        diag = say("aborted", f"rank {r}{line}; {them} lost it at {call}")
        diag.seq = at if at is not None else k
        return diag
    if d.reason in UNKNOWN:  # its file cut short, or another job's: what it did is unknown, not "died"
        kind = "unreadable" if d.reason == "unreadable" else "unknown"
        return say(kind, f"rank {r}{text.unknown(d)}; {them} wait for it at {call}")
    last = _last_seq(d, g_name)
    after = f"after seq {last}" if last is not None else "before its first collective"
    stuck = unfinished(d)
    if (elsewhere := _in_another_group(r, stuck, g_name, them, call, say)) is not None:
        return elsewhere
    if stuck is not None and stuck[1]["kind"] == "p2p":
        return say("unmatched", f"rank {r} waits in {text.p2p(stuck[1])} while {them} wait for it at {call}")
    in_dist = text.in_torch_distributed(d.exit_stack) or text.in_torch_distributed(d.stack)
    if d.exit_error and not (in_dist and d.exit_stack):
        return say(
            "crashed",
            f"rank {r} crashed {after}: {d.exit_error.splitlines()[0]}; {them} wait for it at {call}",
        )
    if in_dist is not None:
        return say(
            "skipped",
            f"rank {r} skipped a collective: it is past it, in torch.distributed's "
            f"{in_dist[2]}(), while {them} wait for it at {call}",
        )
    if d.reason == "exit":
        return say(
            "skipped",
            f"rank {r} skipped a collective: it finished {after} while {them} wait for it at {call}",
        )
    here = text.user_frame(d.stack)
    if here is not None or d.stack:
        at = f" at {text.frame(here)}" if here else ""
        at += _idle(d) or (", before its first collective" if last is None else "")
        return say(
            "straggler",
            f"rank {r} is a straggler (or hangs): still in its own code{at} while "
            f"{them} wait for it at {call}",
        )
    return say("skipped", f"rank {r} never called {call} that {them} called; its last call was seq {last}")


def _not_reached(r: int, d: Dump, k: int, them: str, call: str, g_name: str, say) -> Diagnosis:
    """A rank whose PyTorch dump stops before seq ``k``: what it was doing is not in the dump."""
    last = _last_seq(d, g_name)
    if (elsewhere := _in_another_group(r, unfinished(d), g_name, them, call, say)) is not None:
        return elsewhere
    before = "before its first collective"
    if last is not None:
        e = next(g for g in d.groups.values() if g.name == g_name).collectives[last]
        before = f"after seq {last} ({e['fn']}, {e['state']})"
    return say(
        "straggler",
        f"rank {r} never reached {call}, where {them} wait for it: it stopped {before}; a straggler, "
        "or hung or crashed in its own code (its Flight Recorder dump does not say where its main thread "
        "was: py-spy dump or its log does)",
    )


def _in_another_group(r: int, stuck, g_name: str, them: str, call: str, say) -> Diagnosis | None:
    """Rank ``r`` waits in a call of another group (``stuck``, from :func:`unfinished`): the groups' order."""
    if stuck is None or stuck[0].name == g_name:
        return None
    g2, e2 = stuck
    return say(
        "order",
        f"rank {r} waits in {e2['fn']} seq {e2['seq']} of group {g2.name} while {them} wait for it "
        f"at {call}: the ranks call collectives on different groups in a different order",
        (g2.name, e2["seq"]),
    )


def several_not_reached(rs: list[int], dumps, k: int, present: list[int], g_name: str, e: dict, multi: bool):
    """Ranks ``rs`` (PyTorch dumps) all stopped before seq ``k``: where each stopped, and, when that is one
    rooted call they did not complete, the fact the dumps lack (its root)."""
    call = f"seq {k} ({text.call(e)}){where(g_name, multi)}"
    lasts = {r: _last_seq(dumps[r], g_name) for r in rs}
    shown = ", ".join(f"rank {r} after seq {s}" for r, s in lasts.items())
    line = f"{text.ranks(rs)} never reached {call}, where {text.ranks(present)} wait for them: they stopped ({shown})"
    (last,) = set(lasts.values()) if len(set(lasts.values())) == 1 else (None,)
    if last is not None:
        g = next(g for g in dumps[rs[0]].groups.values() if g.name == g_name)
        x = g.collectives[last]
        if x["fn"] in ROOTED:
            line += (
                f"; seq {last} is a {x['fn']} that the others finished: a {x['fn']} from another root on "
                f"some of them would look like this, and the dumps record no roots"
            )
    line += "; where their main threads were is not in the dumps (py-spy dump tells)"
    return Diagnosis("straggler", sorted(rs), k, line, g_name)


def _idle(d: Dump) -> str:
    done = [e["t_done"] for g in d.groups.values() for e in g.collectives.values() if e["t_done"]]
    return f", {d.time - max(done):.1f} s after its last collective" if done else ""


def _last_seq(d: Dump, g_name: str) -> int | None:
    for g in d.groups.values():
        if g.name == g_name and g.collectives:
            return max(g.collectives)
    return None


def crossed(found: list[Diagnosis], dumps: dict[int, Dump]) -> Diagnosis | None:
    """Ranks each waiting in another group for the other (``found``: rule 2's diagnoses, all of a rank
    waiting elsewhere): the rank whose call is not the one its own loop makes next skipped one."""
    for d in found:
        (r,), (g2, _) = d.ranks, d.waits_in
        mine = sorted(
            ((g.name, e) for g in dumps[r].groups.values() for e in g.collectives.values()),
            key=lambda ge: ge[1]["t_posted"],
        )
        if len(mine) < 2:
            continue
        keyed = [dict(e, fn=(g, e["fn"])) for g, e in mine]  # the group is part of the call
        nxt = calls.expected(keyed[:-1])
        if nxt is None or nxt == calls.key(keyed[-1]) or nxt[0][0] != d.group:
            continue
        skipped = _call_at(dumps, d.group, d.seq)
        cur = mine[-1][1]
        line = (
            f"rank {r} skipped a collective: it did not call seq {d.seq} ({text.call(skipped)}) of group "
            f"{d.group}, where the others wait for it, and went on to {cur['fn']} seq {cur['seq']} of group "
            f"{g2}, the call that comes next"
        )
        return Diagnosis("skipped", [r], d.seq, line, d.group)
    return None


def _call_at(dumps: dict[int, Dump], g_name: str, k: int) -> dict:
    for d in dumps.values():
        for g in d.groups.values():
            if g.name == g_name and k in g.collectives:
                return g.collectives[k]
    raise KeyError(k)
