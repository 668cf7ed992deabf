"""The doctor: every rank's flight record read together, and what went wrong in one line (chapter 6).

::

    python -m mycollectives.doctor DUMP_DIR        # the diagnosis, one line
    python -m mycollectives.doctor DUMP_DIR -v     # ... and each rank's calls around it

``DUMP_DIR`` is where :mod:`mycollectives.flight` wrote its ``rank{R}.json``
files (``MYCOLLECTIVES_FLIGHT_DIR``, or the directory a failed call's error
message names), or where PyTorch's Flight Recorder wrote its dumps (any job
on NCCL or gloo, PyTorch 2.5 on: ``nccl_trace_rank_{R}``, pickle or JSON;
``torchfr`` reads them into the same records, and the line says which
fact a dump lacks when it cannot tell). Files of several runs with one job id
are split into runs (``load.runs``) and the latest is read. Like PyTorch's flight-recorder analyzer, the doctor matches
the ranks' records by sequence number, group by group; the package's
records also say which round of which schedule each rank was in and whom it
waited on, and what the ranks that did not fail were doing, which is how it
tells a rank that died from one that skipped a collective or is still
computing. :func:`diagnose` returns a :class:`~mycollectives.doctor.diagnosis.Diagnosis`; the rules
and their order are in :mod:`.rules` and :mod:`.timing`.
"""

from __future__ import annotations

from pathlib import Path

from . import text
from .load import Dump, load
from .p2p import deadlock, unmatched
from .rules import Diagnosis, align
from .timing import healthy, straggler, unfinished_rank

__all__ = ["Diagnosis", "diagnose", "diagnose_dumps", "load", "table"]


def diagnose_dumps(dumps: dict[int, Dump]) -> Diagnosis:
    """The first rule (:mod:`.rules` lists them) that finds something, else a clean bill of health."""
    if not dumps:
        return Diagnosis("empty", [], None, "no flight records to read")
    named = {r for d in dumps.values() for g in d.groups.values() for r in g.ranks}
    if named - dumps.keys():  # a rank left no record (it died): a peer it stranded mid-exchange is no clue
        rules = (deadlock, align, unmatched, unfinished_rank, straggler)
    else:
        rules = (
            deadlock,
            lambda d: unmatched(d, dead_peers=False),
            align,
            unmatched,
            unfinished_rank,
            straggler,
        )
    for rule in rules:
        found = rule(dumps)
        if found is not None:
            return found
    gone = sorted(named - dumps.keys())
    if gone and all(d.source == "torch" for d in dumps.values()):
        return _left_no_dump(gone, dumps)
    return healthy(dumps)


def _left_no_dump(gone: list[int], dumps: dict[int, Dump]) -> Diagnosis:
    """PyTorch's dumps, all calls alike, and ranks without one: gloo counts a call that failed because a peer
    went away as completed, so the absent rank is the clue."""
    last = max(
        (
            (e["t_posted"], k, e)
            for d in dumps.values()
            for g in d.groups.values()
            for k, e in g.collectives.items()
        ),
        default=None,
        key=lambda x: x[:2],
    )
    where = f"; the others' last call was seq {last[1]} ({text.call(last[2])})" if last else ""
    line = (
        f"{text.ranks(gone)} died: {'it' if len(gone) == 1 else 'they'} left no Flight Recorder dump while "
        f"{text.ranks(dumps)} wrote theirs{where}"
    )
    return Diagnosis("died", gone, last[1] if last else None, line)


def diagnose(directory: str | Path) -> Diagnosis:
    """Read every rank's record in ``directory`` and say what went wrong."""
    dumps, notes = load(directory)
    diag = diagnose_dumps(dumps) if dumps else Diagnosis("empty", [], None, notes[0])
    diag.details = notes + diag.details
    return diag


def table(directory: str | Path, around: int | None = None, width: int = 2) -> str:
    """The ranks' collectives from seq ``around - width`` to ``around + width`` (the last ones if None),
    one line per sequence number, ranks that agree on a call and its state grouped together."""
    dumps, _ = load(directory)
    lines = []
    for key in sorted({k for d in dumps.values() for k in d.groups}):
        per_rank = {r: d.groups[key] for r, d in sorted(dumps.items()) if key in d.groups}
        seqs = sorted({k for g in per_rank.values() for k in g.collectives})
        if not seqs:
            continue
        hi = around if around in seqs else seqs[-1]
        if len(dumps) > 1 or len(per_rank) > 1:
            lines.append(f"group {key[0]} (ranks {', '.join(map(str, key[1]))}):")
        for k in (k for k in seqs if hi - width <= k <= hi + width):
            cells: dict[str, list[int]] = {}
            for r, g in per_rank.items():
                e = g.collectives.get(k)
                cells.setdefault(_cell(e), []).append(r)
            shown = " | ".join(f"{text.ranks(rs)}: {c}" for c, rs in cells.items())
            lines.append(f"  seq {k:>3}  {shown}")
    return "\n".join(lines)


def _cell(e: dict | None) -> str:
    if e is None:
        return "-"
    state = e["state"]
    if state in ("running", "failed") and e["peer"] is not None:
        state += f" (round {e['round']}, {e['what']} {e['peer']})"
    dtype = str(e["dtype"]).replace("float", "f").replace("int", "i")
    return f"{e['fn']}({e['count']} {dtype}) {state}"
