"""Rule 2's last case on PyTorch's Flight Recorder dumps: every rank called seq ``k`` alike, some did not
finish it (:func:`torch_late`).

What the dumps say: when each rank created the call (``time_created_ns``),
its timeout, and on NCCL whether its kernel started on the GPU (``started``)
or is still queued behind earlier work (``scheduled``). On gloo every state
stays ``scheduled``; ``pg_status`` says which calls completed, and a rank
whose all-reduce completed proves that every rank joined it (a rank dumped
right after the others can still show it pending). What they do not say:
roots and reduce ops, so a broadcast from another root cannot be told from a
peer lost inside the call; the line says so.
"""

from __future__ import annotations

import statistics

from . import text
from .absent import ROOTED
from .diagnosis import Diagnosis


def torch_late(k: int, by_rank: dict[int, dict], failed: dict[int, dict], call: str, g_name: str):
    """All ranks called seq ``k`` with the same sizes and dtypes and ``failed`` did not finish it."""
    pending = sorted(failed)
    done = sorted(set(by_rank) - set(pending))
    e0 = by_rank[pending[0]]
    posted = {r: e["t_posted"] for r, e in by_rank.items()}
    last = max(posted, key=posted.get)
    others = [t for r, t in posted.items() if r != last]
    lag = posted[last] - statistics.median(others) if others else 0.0
    timeout = max((e.get("timeout") or 0.0) for e in by_rank.values())
    if timeout and lag > 0.5 * timeout:
        rest = sorted(set(by_rank) - {last})
        line = (
            f"rank {last} is a straggler: it reached {call} {lag:.1f} s after {text.ranks(rest)}, "
            f"whose timeout is {timeout:.0f} s"
        )
        return Diagnosis("straggler", [last], k, line, g_name)
    gloo = e0["algorithm"] == "gloo"
    if done and gloo and e0["fn"] not in ROOTED:
        return None  # a completed all-reduce had every rank in it
    if gloo and e0["fn"] not in ROOTED:  # every rank in it, none seen to finish: the dumps blame no one
        line = (
            f"no fault found in the calls: {text.ranks(by_rank)} all called {call} alike, and it had not "
            "completed when they wrote their dumps (a run dumped as it ended, or every rank waiting on the "
            "transport: NCCL_DEBUG=INFO and the environment checks tell)"
        )
        return Diagnosis("ok", [], k, line, g_name)
    queued = [r for r in pending if by_rank[r]["state"] == "posted"]
    if not gloo and queued and len(queued) < len(by_rank):
        line = (
            f"{text.ranks(queued)} never started {call} on the GPU (state scheduled) while "
            f"{text.ranks(set(by_rank) - set(queued))} started or completed it: their stream is still busy "
            "with earlier work (a kernel that hangs, or a rank slow before it)"
        )
        return Diagnosis("straggler", queued, k, line, g_name)
    finished = f", which {text.ranks(done)} completed" if done else ""
    line = (
        f"{text.ranks(pending)} did not complete {call}{finished}; every rank called it with the same "
        "sizes and dtypes, and the dumps record no roots or reduce ops: a mismatched root or op, or a peer "
        "lost inside the call, would look like this"
    )
    return Diagnosis("stuck", pending, k, line, g_name)
