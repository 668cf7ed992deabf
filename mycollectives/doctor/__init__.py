"""The doctor: every rank's flight record read together, and what went wrong in one line (chapter 6).

::

    python -m mycollectives.doctor DUMP_DIR        # the diagnosis, one line
    python -m mycollectives.doctor DUMP_DIR -v     # ... and each rank's calls around it

``DUMP_DIR`` is where :mod:`mycollectives.flight` wrote its ``rank{R}.json``
files (``MYCOLLECTIVES_FLIGHT_DIR``, or the directory a failed call's error
message names). Like PyTorch's flight-recorder analyzer, the doctor matches
the ranks' records by sequence number, group by group; the package's
records also say which round of which schedule each rank was in and whom it
waited on, and what the ranks that did not fail were doing, which is how it
tells a rank that died from one that skipped a collective or is still
computing. :func:`diagnose` returns a :class:`~.rules.Diagnosis`; the rules
and their order are in :mod:`.rules` and :mod:`.timing`.
"""

from __future__ import annotations

from pathlib import Path

from .load import Dump, load
from .rules import Diagnosis, align, deadlock
from .timing import healthy, straggler, unmatched

__all__ = ["Diagnosis", "diagnose", "diagnose_dumps", "load", "table"]


def diagnose_dumps(dumps: dict[int, Dump]) -> Diagnosis:
    """The first rule of :mod:`.rules` that finds something, else a clean bill of health."""
    if not dumps:
        return Diagnosis("empty", [], None, "no flight records to read")
    for rule in (deadlock, align, unmatched, straggler):
        found = rule(dumps)
        if found is not None:
            return found
    return healthy(dumps)


def diagnose(directory: str | Path) -> Diagnosis:
    """Read every rank's record in ``directory`` and say what went wrong."""
    dumps, notes = load(directory)
    diag = diagnose_dumps(dumps) if dumps else Diagnosis("empty", [], None, notes[0])
    diag.details = notes + diag.details
    return diag


def table(directory: str | Path, around: int | None = None, width: int = 3) -> str:
    """Each rank's collectives near seq ``around`` (the last ones if None), one row per rank."""
    dumps, _ = load(directory)
    lines = []
    for rank, d in sorted(dumps.items()):
        for g in d.groups.values():
            if not g.collectives:
                continue
            hi = around if around is not None and around in g.collectives else max(g.collectives)
            seqs = [k for k in range(hi - width, hi + width + 1) if k in g.collectives]
            cells = []
            for k in seqs:
                e = g.collectives[k]
                state = e["state"]
                if state in ("running", "failed") and e["peer"] is not None:
                    state += f", round {e['round']}, {e['what']} {e['peer']}"
                cells.append(f"#{k} {e['fn']} {e['count']} {e['dtype']} [{state}]")
            head = f"rank {rank} ({g.name}, {d.reason})"
            lines.append(f"{head:<28} " + " | ".join(cells))
    return "\n".join(lines)
