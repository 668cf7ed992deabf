"""What every collective call does before its schedule runs.

1. Find the transport for ``group`` and check this rank's arguments.
2. Agree with the other ranks (the *handshake*): every rank all-gathers a
   small descriptor of its call (function, algorithm, dtype, element count,
   root, op, options; all-to-all split sizes; or the error its arguments
   raised). If any rank's arguments are bad, or the ranks disagree, every
   rank raises a clear error, instead of some ranks hanging while waiting for
   a peer that gave up. ``check=False`` skips it (one fewer latency-bound
   exchange per call), except where all-to-all needs the split sizes.
3. Pick the algorithm (``"auto"``) and build the schedule.
"""

from __future__ import annotations

import os
import zlib
from dataclasses import dataclass, field

import numpy as np
import torch

from .. import auto
from ..algorithms import ALIASES, COLLECTIVES, Spec, algorithms, canonical, entry, schedule_for
from ..collectives import record
from ..executor import execute, workspace
from ..ops import ReduceOp, combiner, op_dtype_error
from ..schedule import TMP, WORK, Schedule
from ..transport import Transport, resolve_group
from .checks import Checker

_OPTIONS = ("timeout", "check", "segment_bytes", "local_size")


@dataclass
class Options:
    timeout: float | None = None
    check: bool = True
    segment_bytes: int | None = None
    local_size: int | None = None

    @classmethod
    def parse(cls, fn: str, options: dict) -> Options:
        for k in options:
            if k not in _OPTIONS:
                raise TypeError(f"{fn}() got an unexpected keyword argument {k!r}; options are {_OPTIONS}")
        return cls(**options)


@dataclass
class Meta:
    """What this rank's call says, and what all ranks must agree on."""

    dtype: torch.dtype
    count: int  # elements of the vector (or of one rank's block)
    root: int = 0
    op: ReduceOp | None = None
    in_splits: list[int] | None = None  # all-to-all, in elements
    out_splits: list[int] | None = None
    # all-to-all with no split sizes given: every rank splits evenly, so the
    # sizes need no exchange (the handshake still checks them unless check=False)
    even: bool = False


@dataclass
class Launch:
    transport: Transport
    meta: Meta
    schedule: Schedule
    options: Options
    fn: str
    splits: np.ndarray | None = field(default=None)

    def run(self, buffers: dict[int, torch.Tensor]) -> None:
        """Execute this rank's part of the schedule on flat ``buffers``."""
        combine = combiner(self.meta.op) if self.meta.op is not None else None
        if TMP in self.schedule.buffers and TMP not in buffers:
            like = next(iter(buffers.values()))
            buffers[TMP] = scratch(
                int(self.schedule.buffers[TMP][self.transport.rank]), like, self.transport, "tmp"
            )
        execute(self.schedule, self.transport, buffers, combine, self.options.timeout, self.fn)


def _id(value) -> int:
    return zlib.crc32(str(value).encode()) if value is not None else -1


_HEAD = 12
_MSG = 32  # int64 words of error message (256 bytes)
_FIELDS = ("function", "algorithm", "dtype", "element count", "root", "op", "segment_bytes", "local_size")


def _describe(fn, algorithm, meta: Meta | None, err, opts: Options, p: int) -> torch.Tensor:
    d = np.zeros(_HEAD + _MSG + 2 * p, dtype=np.int64)
    d[0] = 1 if isinstance(err, ValueError) else 2 if err is not None else 0
    if meta is not None:
        d[1:9] = [
            _id(fn),
            _id(algorithm),
            _id(meta.dtype),
            meta.count,
            meta.root,
            _id(meta.op),
            opts.segment_bytes or -1,
            opts.local_size or -1,
        ]
        if meta.in_splits is not None:
            d[_HEAD + _MSG :] = meta.in_splits + meta.out_splits
    if err is not None:
        raw = str(err).encode()[: 8 * _MSG].ljust(8 * _MSG, b"\0")
        d[_HEAD : _HEAD + _MSG] = np.frombuffer(raw, dtype=np.int64)
    return torch.from_numpy(d)


def _handshake(t: Transport, fn, algorithm, meta, err, opts: Options) -> np.ndarray:
    p = t.world_size
    mine = _describe(fn, algorithm, meta, err, opts, p)
    width = mine.numel()
    everyone = torch.zeros(p * width, dtype=torch.int64, device=t.device)
    everyone[t.rank * width : (t.rank + 1) * width] = mine.to(t.device)
    sched = schedule_for("all_gather", "bruck", p, count=width)
    execute(sched, t, {WORK: everyone}, None, opts.timeout, f"{fn} (argument check)")
    return everyone.cpu().numpy().reshape(p, width)


def _agree(fn: str, me: int, table: np.ndarray, names: dict) -> None:
    """Raise on this rank if any rank's arguments were bad or ranks disagree."""
    if table[me, 0]:
        return  # this rank's own error is raised by the caller
    for r, row in enumerate(table):
        if row[0] and r != me:
            msg = row[_HEAD : _HEAD + _MSG].tobytes().rstrip(b"\0").decode(errors="replace")
            kind = ValueError if row[0] == 1 else TypeError
            raise kind(f"{fn} on rank {me}: rank {r} rejected its arguments: {msg}")
    for i, what in enumerate(_FIELDS, start=1):
        col = table[:, i]
        if (col != col[0]).any():
            shown = ", ".join(f"rank {r}: {names.get(int(v), v)}" for r, v in enumerate(col))
            raise ValueError(f"{fn} on rank {me}: ranks disagree on the {what} ({shown})")


def _names(fn: str, collective: str) -> dict:
    """Readable names for the hashed fields of the descriptors, for messages."""
    known = [*COLLECTIVES, *ALIASES, "auto", *(a for c in COLLECTIVES for a in algorithms(c)), *ReduceOp]
    known += [v for v in vars(torch).values() if isinstance(v, torch.dtype)]
    return {_id(k): getattr(k, "name", str(k)) for k in known}


def _check_splits(fn: str, me: int, table: np.ndarray) -> np.ndarray:
    p = len(table)
    sent = table[:, _HEAD + _MSG : _HEAD + _MSG + p]  # sent[s, d]: s sends d this many
    expected = table[:, _HEAD + _MSG + p :]  # expected[d, s]: d expects this from s
    bad = np.argwhere(sent != expected.T)
    if len(bad):
        s, d = bad[0]
        raise ValueError(
            f"{fn} on rank {me}: rank {s} sends {sent[s, d]} elements to rank {d}, "
            f"but rank {d} expects {expected[d, s]} from it (check input/output split sizes)"
        )
    return sent


def launch(fn: str, group, algorithm, options: dict, validate) -> Launch:
    """Check arguments on every rank, agree, then pick and build the schedule.

    ``validate(checker, transport)`` checks this rank's arguments and returns
    its :class:`Meta`; it must not modify any tensor.
    """
    try:
        t = resolve_group(group)
        opts = Options.parse(fn, options)
    except (ValueError, TypeError) as e:
        raise _on_rank(e, fn, _rank_hint()) from None
    collective = canonical(fn)
    meta, err = None, None
    try:
        if not isinstance(algorithm, str):
            raise TypeError(f"argument 'algorithm' must be a str, got {algorithm!r}")
        if algorithm != "auto":
            entry(collective, algorithm)  # raises for an unknown name
        device = t.device if hasattr(t, "backend") else None  # local worlds take any device
        meta = validate(Checker(fn, t.rank, t.world_size, device), t)
        if meta.op is not None and (why := op_dtype_error(meta.op, meta.dtype)):
            raise TypeError(f"argument 'op': {why}")
    except (ValueError, TypeError) as e:
        err = _on_rank(e, fn, t.rank)
    p = t.world_size
    splits = None
    needs_splits = collective == "all_to_all" and not (meta is not None and meta.even)
    if p > 1 and (opts.check or needs_splits):
        table = _handshake(t, fn, algorithm, meta, err, opts)
        _agree(fn, t.rank, table, _names(fn, collective))
        if err is None and collective == "all_to_all":
            splits = _check_splits(fn, t.rank, table)
    if err is not None:
        raise err
    if collective == "all_to_all" and splits is None:
        splits = np.tile(np.asarray(meta.in_splits, dtype=np.int64), (p, 1))

    itemsize = torch.empty(0, dtype=meta.dtype).element_size()
    call = {"root": meta.root, "segment_bytes": opts.segment_bytes}
    if splits is not None:
        call["splits"] = splits.tolist()
        nbytes = int(splits.sum(axis=1).max()) * itemsize  # auto ranks the even all-to-all of the busiest row
    else:
        call["count"] = meta.count
        nbytes = record(collective).size(Spec(collective, p, count=meta.count), itemsize)
    env = os.environ.get("LOCAL_WORLD_SIZE") if hasattr(t, "backend") else None
    call["local_size"] = opts.local_size or (int(env) if env else None)
    name = auto.choose(collective, p, nbytes, itemsize=itemsize) if algorithm == "auto" else algorithm
    try:
        schedule = schedule_for(collective, name, p, itemsize=itemsize, **call)
    except ValueError as e:
        raise ValueError(f"{fn} on rank {t.rank}: {e}") from None
    return Launch(t, meta, schedule, opts, fn, splits)


def _on_rank(e: Exception, fn: str, rank) -> Exception:
    """The same error, its message prefixed with the function and rank if it lacks them."""
    if str(e).startswith(f"{fn} on rank"):
        return e
    return type(e)(f"{fn} on rank {rank}: {e}")


def _rank_hint():
    """This process's rank, for errors raised before the group is known."""
    from ..transport import current_local

    local = current_local()
    if local is not None:
        return local.rank
    import torch.distributed as dist

    return dist.get_rank() if dist.is_available() and dist.is_initialized() else "?"


def scratch(numel: int, like: torch.Tensor, transport=None, slot: str = "work") -> torch.Tensor:
    """Working memory for one call: fresh, or, given the ``transport``, the
    executor's reusable :func:`~mycollectives.executor.workspace`."""
    if transport is None:
        return torch.empty(numel, dtype=like.dtype, device=like.device)
    return workspace(transport, slot, numel, like)
