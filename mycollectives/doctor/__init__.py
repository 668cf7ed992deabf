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

from . import load as load_mod
from . import native, text
from .load import Dump, load, load_jobs
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
    calm = None  # a rule that found nothing wrong but says why: later rules may still find a fault
    for rule in rules:
        found = rule(dumps)
        if found is not None and found.kind == "ok":
            calm = calm or found
        elif found is not None:
            return _with_missing(_with_aborts(found, dumps), sorted(named - dumps.keys()))
    if calm is not None:
        return calm
    gone = sorted(named - dumps.keys())
    if gone and all(d.source == "torch" for d in dumps.values()):
        return _left_no_dump(gone, dumps)
    fine = healthy(dumps)
    aborted = sorted(r for r, d in dumps.items() if d.reason == load_mod.NATIVE)
    if aborted:  # every call the others made completed: it died after them, or between their calls
        line, at = native.said(dumps[aborted[0]], dumps)
        return Diagnosis("aborted", aborted, at, f"rank {aborted[0]}{line}; {fine.line}")
    taken = sorted(r for r, d in dumps.items() if d.reason == load_mod.OTHER_JOB)
    if taken and fine.kind == "ok":  # no fault among the others; of these ranks nothing is known
        said = "; ".join(f"rank {r}{text.unknown(dumps[r])}" for r in taken)
        return Diagnosis("unknown", taken, None, f"{fine.line}; but {said}")
    return fine


def _with_aborts(diag: Diagnosis, dumps: dict[int, Dump]) -> Diagnosis:
    """``diag``, its line also naming the ranks that died in native code that it does not name."""
    for r, d in sorted(dumps.items()):
        if d.reason == load_mod.NATIVE and r not in diag.ranks:
            hit = native.died_in(d, dumps)
            where = f" in seq {hit[0]} ({hit[2]['fn']})" if hit else ""
            diag.line += f"; rank {r}{text.unknown(d)}{where}"
    return diag


def _with_missing(diag: Diagnosis, gone: list[int]) -> Diagnosis:
    """``diag``, its line also naming the ranks without a record that it does not name: victims, often
    (gloo aborts a rank that receives a message of the wrong size, and an aborted rank writes nothing)."""
    victims = [r for r in gone if r not in diag.ranks]
    if victims:
        diag.line += (
            f"; no record from {text.ranks(victims)}, which the fault may have stopped "
            "(gloo aborts a rank that receives a message of the wrong size)"
        )
    return diag


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
    """Read every rank's record in ``directory`` and say what went wrong. The newest run is
    diagnosed; files of other jobs lying there too (dumps of two jobs handed over together) are
    read apart, and the line says what each of them shows."""
    dumps, notes, others = load_jobs(directory)
    diag = diagnose_dumps(dumps) if dumps else Diagnosis("empty", [], None, notes[0])
    diag.details = [n for n in notes if n != diag.line] + diag.details  # the line is not said twice
    if others:
        diag.line = f"{_job(dumps)}: {diag.line}; " + "; ".join(
            f"also here, read apart, {_job(o)}: {diagnose_dumps(o).line}" for o in others
        )
    return diag


def _job(dumps: dict[int, Dump]) -> str:
    """``job J (4 ranks; files of ranks 1-3)``: one job's files among others'."""
    first = next(iter(dumps.values()))
    world = max((len(g.ranks) for d in dumps.values() for g in d.groups.values()), default=0)
    mine = [r for r, d in dumps.items() if d.reason != load_mod.OTHER_JOB]
    return f"job {first.job} ({world} ranks; files of {text.ranks(mine)})"


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
