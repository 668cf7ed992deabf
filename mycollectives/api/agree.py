"""The argument check every collective makes across ranks (the *handshake*).

Every rank all-gathers a small descriptor of its call: function, algorithm,
dtype, element count, root, op, options (``channels=`` among them); all-to-all's split sizes; or the
error its own arguments raised; for a tensor in symmetric memory, which
rendezvous it lies in and at which offset (every rank must use the same
rendezvous; offsets may differ, since a load reads each peer at that peer's
offset, and :func:`same_offset` tells whether the call may skip the barrier
that publishes them). If any rank's arguments are bad, or the ranks disagree, every
rank raises a clear error, instead of some ranks hanging while they wait for
a peer that gave up, or reading the wrong bytes. The descriptor travels by
the package's own all-gather (Bruck's), through the same transport as the
call; on a group with symmetric memory it meets in the group's control block
(:func:`mycollectives.symmetric.control`), whether or not the call's tensors
are in the heap, so a rank in the heap and one outside it are told so. Every
descriptor carries a magic word: a message that is not one (a user's send
with a tag in the package's range) is refused, never read as a descriptor.
"""

from __future__ import annotations

import functools
import zlib

import numpy as np
import torch

from .. import symmetric
from ..algorithms import ALIASES, algorithms, schedule_for
from ..collectives import collectives, record
from ..errors import CollectiveError
from ..executor import execute
from ..ops import ReduceOp
from ..schedule import WORK
from ..transport import COLLECTIVE_TAG, Transport


def _id(value) -> int:
    return zlib.crc32(str(value).encode()) if value is not None else -1


_HEAD = 14
_MAGIC_AT, MAGIC = 13, 0x6D63_6172_6773  # "mcargs": every descriptor carries it
_NFIELDS = 12
_OFFSET_AT = 10  # the byte offset in symmetric memory: carried, not required to agree
_AGREED = [i for i in range(1, 1 + _NFIELDS) if i != _OFFSET_AT]
_MSG = 32  # int64 words of error message (256 bytes)
_FIELDS = (
    "function",
    "algorithm",
    "dtype",
    "element count",
    "root",
    "op",
    "segment_bytes",
    "local_size",
    "use of symmetric memory",
    "byte offset in symmetric memory",
    "symmetric memory allocation (its rendezvous)",
    "channels",
)


@functools.lru_cache(maxsize=1024)
def _fields(fn, algorithm, dtype, count, root, op, segment, local, symmetric) -> tuple[int, ...]:
    return (
        _id(fn),
        _id(algorithm),
        _id(dtype),
        count,
        root,
        _id(op),
        segment or -1,
        local or -1,
        int(symmetric),
    )


def _describe(fn, algorithm, meta, err, opts, p: int, placed=None) -> np.ndarray:
    d = np.zeros(_HEAD + _MSG + 2 * p, dtype=np.int64)
    d[0] = 1 if isinstance(err, ValueError) else 2 if err is not None else 0
    d[_MAGIC_AT] = MAGIC
    if placed is not None:
        d[_OFFSET_AT], d[11] = placed.offset, placed.ident
    else:
        d[_OFFSET_AT] = d[11] = -1
    d[12] = opts.channels or -1  # channels=, as the caller gave it (-1: the default)
    if meta is not None:
        d[1:10] = _fields(
            fn,
            algorithm,
            meta.dtype,
            meta.count,
            meta.root,
            meta.op,
            opts.segment_bytes,
            opts.local_size,
            meta.symmetric,
        )
        if meta.in_splits is not None and p:  # p = 0: the first step, without split sizes
            d[_HEAD + _MSG :] = meta.in_splits + meta.out_splits
    if err is not None:
        raw = str(err).encode()[: 8 * _MSG].ljust(8 * _MSG, b"\0")
        d[_HEAD : _HEAD + _MSG] = np.frombuffer(raw, dtype=np.int64)
    return d


def handshake(t: Transport, fn, algorithm, meta, err, opts, heap=None) -> np.ndarray:
    """Every rank's descriptor, one row per rank (call on every rank). ``heap``:
    where the call's tensor lies in symmetric memory
    (:class:`~mycollectives.symmetric.Placement`), or None. On a group with
    symmetric memory the descriptors meet in its control block's mailboxes,
    one barrier on the signal pads instead of a round of messages.

    Elsewhere the check is linear in the ranks: one all-reduce of each field's
    largest and smallest value tells whether every rank holds the same
    descriptor, with no error and no split sizes; then every row is this rank's
    (a read-only view, no copy). Only a disagreement, an error, or all-to-all's
    split sizes gather every rank's descriptor, so that the message can name
    who differs."""
    p = t.world_size
    meet = symmetric.control(t) or (heap.handle if heap is not None else None)
    if meet is not None:
        return _through_heap(
            meet, _describe(fn, algorithm, meta, err, opts, p, heap), opts.timeout or t.timeout, fn
        )
    mine = _describe(fn, algorithm, meta, err, opts, 0, heap)
    head = torch.from_numpy(np.concatenate([mine[:_HEAD], -mine[:_HEAD]])).to(t.device)
    sched = _schedule("all_reduce", "recursive_doubling", p, head.numel())
    _exchange(sched, t, {WORK: head}, _largest, opts, fn)
    head = head.cpu().numpy()
    if head[_MAGIC_AT] != MAGIC or -head[_HEAD + _MAGIC_AT] != MAGIC:
        raise _stray(fn, t.rank, "a peer")
    same = (head[:_HEAD] == -head[_HEAD:]).all() and head[0] == 0
    if same and not _split_call(fn):
        return np.broadcast_to(mine, (p, len(mine)))
    if same:  # every rank calls the same all-to-all: gather the split sizes
        mine = _describe(fn, algorithm, meta, err, opts, p, heap)
    return _gather(t, mine, opts, fn)


@functools.lru_cache(maxsize=64)
def _schedule(collective: str, algorithm: str, p: int, count: int):
    """The check's schedule, built once per shape (the executor's plans are cached per schedule)."""
    return schedule_for(collective, algorithm, p, count=count)


def _largest(acc: torch.Tensor, x: torch.Tensor) -> None:
    torch.maximum(acc, x, out=acc)


def _split_call(fn: str) -> bool:
    """Whether ``fn`` takes split sizes (its descriptor then carries them)."""
    try:
        return record(fn).split
    except (KeyError, ValueError):
        return False


def _gather(t: Transport, mine: np.ndarray, opts, fn: str) -> np.ndarray:
    p, width = t.world_size, len(mine)
    everyone = torch.zeros(p * width, dtype=torch.int64, device=t.device)
    everyone[t.rank * width : (t.rank + 1) * width] = torch.from_numpy(mine).to(t.device)
    sched = _schedule("all_gather", "bruck", p, width)
    _exchange(sched, t, {WORK: everyone}, None, opts, fn)
    return everyone.cpu().numpy().reshape(p, width)


def _exchange(sched, t: Transport, buffers: dict, combine, opts, fn: str) -> None:
    """Run one step of the check; a message of the wrong size is not a descriptor."""
    try:
        execute(sched, t, buffers, combine, opts.timeout, f"{fn} (argument check)")
    except ValueError as e:
        if "elements" not in str(e):
            raise
        raise _stray(fn, t.rank, f"a peer ({str(e).split(chr(10))[0]})") from e


def _stray(fn: str, me: int, source: str) -> CollectiveError:
    return CollectiveError(
        f"{fn} on rank {me}: the argument check received from {source} a message that is not an argument "
        f"descriptor (was a send with a tag >= {COLLECTIVE_TAG}, the package's own, pending there?)"
    )


def _through_heap(heap, mine: np.ndarray, timeout: float, fn: str) -> np.ndarray:
    """The descriptors through the mailboxes: each call writes one half of its
    rank's mailbox, the next call the other half. A rank that is done with
    call k may write call k+1's descriptor before a slower peer has read
    call k's; it cannot reach call k+2 before every peer has arrived at call
    k+1's barrier, that is, has read call k's."""
    from ..errors import CollectiveTimeout, DeadlockError, PeerError
    from ..transport import TransportDeadlock, TransportPeerError, TransportTimeout

    half = len(heap.mailboxes()[0]) // 2
    if len(mine) > half:
        raise ValueError(f"{fn}: {heap.world_size} ranks need a larger mailbox than symmetric memory has")
    at = (heap.checks % 2) * half
    heap.checks += 1
    boxes = [box[at : at + len(mine)] for box in heap.mailboxes()]
    boxes[heap.rank][:] = mine
    try:
        heap.barrier(1, timeout)
    except TransportDeadlock as e:  # a virtual run's peer that will never arrive
        raise DeadlockError(f"{fn} (argument check in symmetric memory) on rank {heap.rank}: {e}") from e
    except TransportTimeout as e:
        raise CollectiveTimeout(
            f"{fn} (argument check in symmetric memory) on rank {heap.rank}: rank {e.peer} did not arrive "
            f"within {timeout:g} s (did it call {fn} on this group?)"
        ) from e
    except TransportPeerError as e:
        raise PeerError(f"{fn} (argument check) on rank {heap.rank}: {e}") from e
    return np.stack(boxes)  # a copy: the next call may overwrite them


def agree(fn: str, me: int, table: np.ndarray) -> None:
    """Raise on this rank if any rank's arguments were bad or ranks disagree."""
    if table[me, 0]:
        return  # this rank's own error is raised by the caller
    fields = table[:, _AGREED]
    if not table[:, 0].any() and (fields == fields[0]).all() and (table[:, _MAGIC_AT] == MAGIC).all():
        return  # the common case, decided in one comparison
    for r, row in enumerate(table):
        if row[_MAGIC_AT] != MAGIC or row[0] not in (0, 1, 2):
            raise CollectiveError(
                f"{fn} on rank {me}: the argument check received from rank {r} a message that is not "
                f"an argument descriptor (was a send with a tag >= {COLLECTIVE_TAG}, the package's own, "
                "pending on that rank?)"
            )
    for r, row in enumerate(table):
        if row[0] and r != me:
            msg = row[_HEAD : _HEAD + _MSG].tobytes().rstrip(b"\0").decode(errors="replace")
            kind = ValueError if row[0] == 1 else TypeError
            raise kind(f"{fn} on rank {me}: rank {r} rejected its arguments: {msg}")
    for i, what in enumerate(_FIELDS, start=1):
        if i == _OFFSET_AT:
            continue
        col = table[:, i]
        if (col != col[0]).any():
            known = (
                names()
                if i < 10
                else {-1: "default"}
                if what == "channels"
                else {-1: "not in symmetric memory"}
            )
            shown = ", ".join(f"rank {r}: {known.get(int(v), v)}" for r, v in enumerate(col))
            raise ValueError(f"{fn} on rank {me}: ranks disagree on the {what} ({shown})")


def same_offset(table: np.ndarray) -> bool:
    """Whether every rank's tensor lies at the same byte offset of its block (after :func:`agree`)."""
    col = table[:, _OFFSET_AT]
    return bool((col == col[0]).all())


def names() -> dict:
    """Readable names for the hashed fields of the descriptors, for messages."""
    known = [*collectives(), *ALIASES, "auto", *(a for c in collectives() for a in algorithms(c)), *ReduceOp]
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
