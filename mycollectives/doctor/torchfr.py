"""PyTorch's Flight Recorder dumps, read into the doctor's own records (chapter 6).

PyTorch (2.5 on) keeps the last ``TORCH_FR_BUFFER_SIZE`` collectives of
every process group, NCCL's and gloo's, and writes them as a pickle (NCCL's
watchdog on a timeout, to ``TORCH_NCCL_DEBUG_INFO_TEMP_FILE`` + rank, by
default ``/tmp/nccl_trace_rank_{R}``; or
``torch._C._distributed_c10d._dump_fr_trace()``) or as JSON
(``_dump_fr_trace_json()``). A dump is a dict: ``version`` ("2.2" ...
"2.10"), ``pg_config`` (each group's name, description and ranks),
``pg_status`` (each group's last enqueued, started and completed sequence
number), and ``entries``, one per call: ``collective_seq_id`` (``seq_id``
before version 2.2) or ``p2p_seq_id``, ``profiling_name``
(``nccl:all_reduce``, ``nccl:send 0->1``), ``process_group`` (name,
description), ``input_sizes``, ``input_dtypes``, ``state`` (scheduled,
started, completed), ``time_created_ns``, ``time_discovered_started_ns``,
``time_discovered_completed_ns``, ``duration_ms`` (NCCL, with timing
enabled), ``retired``, ``timeout_ms`` and ``frames`` (the pickle only). The
rank is the number that ends the file's name, as PyTorch's analyzer reads it.

Each entry becomes an entry of :mod:`.load`'s model, so the doctor's rules
judge both kinds of record. Collectives keep PyTorch's sequence numbers
(from 1); point-to-point calls are counted from 0, as the package counts
them (``p2p #0`` is PyTorch's ``p2p_seq_id`` 1). What a dump does not hold, the doctor cannot
tell, and says so (:data:`MISSING`): roots and reduce ops, where a rank's
main thread was, gloo's point-to-point calls, and on gloo whether a call
started (its states stay "scheduled": ``pg_status`` says which completed).
"""

from __future__ import annotations

import ast
import io
import json
import math
import pickle
import re
from pathlib import Path

from . import model as load  # the doctor's model (Dump, Group, ENTRY)

MISSING = "PyTorch's Flight Recorder records no roots, reduce ops or stacks of the ranks' main threads"
DTYPES = dict(
    Float="float32",
    Double="float64",
    Half="float16",
    BFloat16="bfloat16",
    Int="int32",
    Long="int64",
    Short="int16",
    Char="int8",
    Byte="uint8",
    Bool="bool",
)
_P2P = re.compile(r"(send|recv)\s+(\d+)\s*(->|<-)\s*(\d+)")
_RANK = re.compile(r"(\d+)(\.json|\.pkl|\.pickle)?$")


class _NoGlobals(pickle.Unpickler):
    """A dump holds only dicts, lists, strings and numbers: nothing that names a class is loaded."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"refers to {module}.{name}, which a flight recorder dump never does")


def rank_of(path: Path) -> int | None:
    """The rank a dump's file name ends with (``nccl_trace_rank_3`` -> 3), or None."""
    m = _RANK.search(path.name)
    return int(m.group(1)) if m and int(m.group(1)) < 2**31 else None  # NCCL's ranks are C ints


def is_dump(path: Path) -> bool:
    """Whether ``path`` may be a Flight Recorder dump: a file whose name ends with a rank, not the
    package's own ``rank{R}.json``."""
    return (
        path.is_file()
        and not path.name.startswith(".")
        and not re.fullmatch(r"rank\d+\.json", path.name)
        and rank_of(path) is not None
    )


def _doc(path: Path) -> dict:
    """The dump as plain data; ``ValueError`` saying what is wrong."""
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise ValueError(f"{type(e).__name__}: {e}") from e
    try:
        if raw[:1] == b"\x80":
            doc = _NoGlobals(io.BytesIO(raw)).load()
        else:
            doc = json.loads(raw.decode())
    except Exception as e:  # noqa: BLE001 - any damage to the file is a file that cannot be read
        raise ValueError(f"neither a pickle nor a JSON dump ({type(e).__name__}: {str(e)[:80]})") from e
    if not isinstance(doc, dict) or not isinstance(doc.get("entries"), list):
        raise ValueError("not a Flight Recorder dump (no list of entries)")
    return doc


def _int(x, what: str) -> int:
    if isinstance(x, bool) or not isinstance(x, (int, str)):
        raise ValueError(f"{what} is {x!r}, not an integer")
    try:
        return int(x)
    except ValueError:
        raise ValueError(f"{what} is {x!r}, not an integer") from None


def _seconds(ns) -> float | None:
    if isinstance(ns, (int, float)) and not isinstance(ns, bool) and ns > 0 and math.isfinite(ns):
        return ns / 1e9
    return None


def _groups(doc: dict) -> dict[str, tuple[str, tuple[int, ...]]]:
    """pg_config: name (and description) -> (name, ranks)."""
    out = {}
    cfg = doc.get("pg_config")
    for key, c in cfg.items() if isinstance(cfg, dict) else []:
        if not isinstance(c, dict):
            continue
        ranks = c.get("ranks")
        try:
            ranks = ast.literal_eval(ranks) if isinstance(ranks, str) else ranks
            ranks = tuple(_int(r, "a group's rank") for r in ranks)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            continue
        for name in {str(key), str(c.get("name", "")), str(c.get("desc", ""))} - {"", "undefined"}:
            out[name] = ranks
        out.setdefault("", ranks)  # PyTorch 2.13's gloo writes the default group under ""
    return out


def _site(frames) -> tuple[str | None, str | None]:
    """The innermost frame of the program itself (frames are innermost first)."""
    for f in frames if isinstance(frames, list) else []:
        if isinstance(f, dict) and "/torch/" not in str(f.get("filename", "")):
            return f"{f.get('filename')}:{f.get('line')}", str(f.get("name"))
    return None, None


def _entry(e: dict, completed: int | None, gloo: bool) -> dict:
    """One Flight Recorder entry as the doctor's entry (``ValueError`` if its fields are odd)."""
    name = str(e.get("profiling_name", "?"))
    fn = name.split(":", 1)[-1].strip()
    p2p = _P2P.match(fn)
    seq_key = "p2p_seq_id" if p2p else ("collective_seq_id" if "collective_seq_id" in e else "seq_id")
    seq = _int(e.get(seq_key, -1), seq_key) - (1 if p2p else 0)  # the doctor counts p2p calls from 0
    sizes = e.get("input_sizes") or []
    count = (
        sum(math.prod(_int(n, "an input size") for n in s) for s in sizes)
        if isinstance(sizes, list)
        else None
    )
    dtypes = e.get("input_dtypes")
    first = dtypes[0] if isinstance(dtypes, list) and dtypes else None
    dtype = DTYPES.get(first, first.lower()) if isinstance(first, str) else None  # odd: unknown
    state = {"scheduled": "posted", "started": "running", "completed": "completed"}.get(e.get("state"), "?")
    if gloo and completed is not None:  # gloo's states stay "scheduled": pg_status says which completed
        state = "completed" if not p2p and seq <= completed else "posted"
    t_posted = _seconds(e.get("time_created_ns"))
    if t_posted is None:
        raise ValueError(f"entry seq {seq} has no creation time")
    t_started, t_done = (
        _seconds(e.get("time_discovered_started_ns")),
        _seconds(e.get("time_discovered_completed_ns")),
    )
    site, func = _site(e.get("frames"))
    out = dict(load.ENTRY, seq=seq, fn=fn, dtype=dtype, count=count, state=state, site=site, function=func)
    out.update(t_posted=t_posted, t_started=t_started, t_done=t_done, algorithm=name.split(":")[0])
    timeout = e.get("timeout_ms")
    out["timeout"] = timeout / 1e3 if isinstance(timeout, (int, float)) and timeout > 0 else None
    if p2p:
        # "send 0->1": this rank (0) sends to 1; "recv 3<-0": this rank (3) receives from 0
        out.update(kind="p2p", fn=p2p.group(1), root=int(p2p.group(4)))
        out["peer"] = out["root"] if state != "completed" else None
    return out


def read(path: Path) -> load.Dump:
    """One rank's dump as the doctor's :class:`~.load.Dump`; ``ValueError`` saying what is wrong."""
    doc = _doc(path)
    rank = rank_of(path)
    if rank is None:
        raise ValueError("no rank at the end of the file's name")
    configs = _groups(doc)
    known = {r for ranks in configs.values() for r in ranks}
    if known and rank not in known:
        raise ValueError(f"the rank in its file name, {rank}, is in none of its groups ({len(known)} ranks)")
    status = doc.get("pg_status") if isinstance(doc.get("pg_status"), dict) else {}
    groups: dict[tuple, load.Group] = {}
    gloo = False
    for e in doc["entries"]:
        if not isinstance(e, dict):
            raise ValueError(f"an entry is {type(e).__name__}, not a dict")
        pg = e.get("process_group")
        if not isinstance(pg, (list, tuple)) or len(pg) != 2:
            raise ValueError(f"entry {e.get('record_id')} has no process_group (name, description)")
        pg_name, desc = str(pg[0]), str(pg[1])
        gloo = gloo or str(e.get("profiling_name", "")).startswith("gloo:")
        st = status.get(pg_name) if isinstance(status.get(pg_name), dict) else {}
        completed = st.get("last_completed_collective")
        completed = _int(completed, "last_completed_collective") if completed is not None else None
        x = _entry(e, completed, gloo)
        if x["kind"] != "p2p" and x["seq"] < 0:  # not a sequence number: the call is unknown, not absent
            continue
        ranks = configs.get(pg_name) or configs.get(desc) or configs.get("") or ()
        label = "default" if desc == "default_pg" or pg_name == "0" and not desc else desc or pg_name
        key = (label, ranks)
        if key not in groups:
            me = ranks.index(rank) if rank in ranks else rank
            groups[key] = load.Group(label, ranks, me, None)
        g = groups[key]
        (g.p2p.append(x) if x["kind"] == "p2p" else g.collectives.__setitem__(x["seq"], x))
    if gloo:  # gloo's collectives block the caller: a call followed by a later one has completed
        for g in groups.values():
            top = max(g.collectives, default=0)
            for k, x in g.collectives.items():
                if k < top:
                    x["state"] = "completed"
    lib = "gloo" if gloo else "NCCL"
    times = [x["t_posted"] for g in groups.values() for x in [*g.collectives.values(), *g.p2p]]
    return load.Dump(
        rank=rank,
        job="torch:" + _RANK.sub("", path.name),
        host="?",
        reason=f"PyTorch Flight Recorder ({lib}, version {doc.get('version', '?')})",
        time=max(times, default=0.0),
        stack=None,
        exit_error=None,
        groups=groups,
        path=path,
        source="torch",
    )
