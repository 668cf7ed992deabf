"""What the doctor says (:class:`Diagnosis`), and the groups its rules walk."""

from __future__ import annotations

from dataclasses import dataclass, field

from .load import Dump, Group


@dataclass
class Diagnosis:
    """What the doctor found: ``kind``, the ranks to blame, the sequence number, and one line."""

    kind: str  # deadlock, died, crashed, skipped, extra, order, mismatch, several, straggler, hang,
    # unmatched, stuck, unreadable, aborted (native code), unknown (another job's file), ok, empty
    ranks: list[int]
    seq: int | None
    line: str
    group: str = "default"
    details: list[str] = field(default_factory=list)
    waits_in: tuple[str, int] | None = None  # the blamed rank waits in (group, seq) of another group


def groups(dumps: dict[int, Dump]) -> list[tuple[tuple, dict[int, Group]]]:
    """Every group, with each rank's record of it (the default group first)."""
    out: dict[tuple, dict[int, Group]] = {}
    for rank, d in dumps.items():
        for key, g in d.groups.items():
            out.setdefault(key, {})[rank] = g
    return sorted(out.items(), key=lambda kv: (kv[0][0] not in ("default", "local world"), kv[0]))


def where(g_name: str, multi: bool) -> str:
    return f" in group {g_name}" if multi else ""


def unfinished(d: Dump) -> tuple[Group, dict] | None:
    """The latest call of ``d`` that did not complete (failed, or still in progress), in any group."""
    best = None
    for g in d.groups.values():
        for e in [*g.collectives.values(), *g.p2p]:
            if e["state"] != "completed" and (best is None or e["t_posted"] > best[1]["t_posted"]):
                best = (g, e)
    return best
