"""Early sends: an opt-in pipelining of a ring across its steps (gloo only).

With ``MYCOLLECTIVES_EARLY_SENDS=1``, a segment of the next round's sends
goes out as soon as this round's receives that write its data have been
applied, instead of after the whole round. Messages to one peer still leave
in the order of the plan. Off by default: measured side by side on gloo (2
and 4 processes on 2 cores, 16 and 64 MiB all-reduce; see
``benchmarks/results/early_sends/``), it bought nothing, since more messages
in flight only competed for the same cores.
"""

from __future__ import annotations

import os

from .plan import RoundPlan, overlaps
from .transport.base import Label

ENV = "MYCOLLECTIVES_EARLY_SENDS"


def enabled(transport, seg: int | None) -> bool:
    """Whether to send early: opted in, on a transport that cuts messages and
    posts them one by one (not NCCL's batched rounds)."""
    return seg is not None and not getattr(transport, "batched", False) and os.environ.get(ENV, "0") == "1"


def candidates(rp: RoundPlan, recvs, next_sends) -> dict[int, list]:
    """The next round's one-piece sends that may leave during this round: per
    peer, in plan order, each with the set of this round's receives it waits
    for (those that write its region). A peer's queue stops at the first send
    that must wait for the end of the round (several pieces, or data that a
    local copy or a deferred receive writes)."""
    late_writes = [(d, o, c, False) for _, _, d, o, c, _ in rp.local]
    late_writes += [p for _, pieces, _, late in recvs if late for p in pieces]
    out: dict[int, list] = {}
    blocked: set[int] = set()
    for i, (msg, peer, region) in enumerate(next_sends):
        if peer in blocked:
            continue
        if region is None or any(overlaps(w, [region[:3]]) for w in late_writes):
            blocked.add(peer)
            continue
        deps = {
            k for k, (_, pieces, _, _) in enumerate(recvs) if any(overlaps(p, [region[:3]]) for p in pieces)
        }
        out.setdefault(peer, []).append([i, deps, msg])
    return out


def release(waiting: dict[int, list], done: int | None, early: dict, transport, tag: Label) -> None:
    """Receive ``done`` has been applied: post the next round's sends that no
    longer wait for anything, in order, per peer."""
    for queue in waiting.values():
        for item in queue:
            item[1].discard(done)
        while queue and not queue[0][1]:
            i, _, msg = queue.pop(0)
            early[i] = transport.isend(msg.tensor, msg.peer, 0, tag)
