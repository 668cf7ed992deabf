"""The argument check every collective makes across ranks (the *handshake*).

Every rank all-gathers a small descriptor of its call: function, algorithm,
dtype, element count, root, op, options; all-to-all's split sizes; or the
error its own arguments raised. If any rank's arguments are bad, or the ranks
disagree, every rank raises a clear error, instead of some ranks hanging
while they wait for a peer that gave up. The descriptor travels by the
package's own all-gather (Bruck's), through the same transport as the call.
"""

from __future__ import annotations

import zlib

import numpy as np
import torch

from ..algorithms import ALIASES, COLLECTIVES, algorithms, schedule_for
from ..executor import execute
from ..ops import ReduceOp
from ..schedule import WORK
from ..transport import Transport


def _id(value) -> int:
    return zlib.crc32(str(value).encode()) if value is not None else -1


_HEAD = 12
_MSG = 32  # int64 words of error message (256 bytes)
_FIELDS = ("function", "algorithm", "dtype", "element count", "root", "op", "segment_bytes", "local_size")


def _describe(fn, algorithm, meta, err, opts, p: int) -> torch.Tensor:
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


def handshake(t: Transport, fn, algorithm, meta, err, opts) -> np.ndarray:
    """Every rank's descriptor, one row per rank (call on every rank)."""
    p = t.world_size
    mine = _describe(fn, algorithm, meta, err, opts, p)
    width = mine.numel()
    everyone = torch.zeros(p * width, dtype=torch.int64, device=t.device)
    everyone[t.rank * width : (t.rank + 1) * width] = mine.to(t.device)
    sched = schedule_for("all_gather", "bruck", p, count=width)
    execute(sched, t, {WORK: everyone}, None, opts.timeout, f"{fn} (argument check)")
    return everyone.cpu().numpy().reshape(p, width)


def agree(fn: str, me: int, table: np.ndarray, names: dict) -> None:
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


def names(fn: str, collective: str) -> dict:
    """Readable names for the hashed fields of the descriptors, for messages."""
    known = [*COLLECTIVES, *ALIASES, "auto", *(a for c in COLLECTIVES for a in algorithms(c)), *ReduceOp]
    known += [v for v in vars(torch).values() if isinstance(v, torch.dtype)]
    return {_id(k): getattr(k, "name", str(k)) for k in known}


def check_splits(fn: str, me: int, table: np.ndarray) -> np.ndarray:
    """All-to-all's split matrix, ``sent[s, d]``, checked against what every rank expects."""
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
