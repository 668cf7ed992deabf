"""What every collective call does around its schedule.

1. Find the transport for ``group`` (a rank outside the group does nothing,
   as in torch.distributed) and check this rank's arguments and options.
2. In the group's order (:mod:`.work`: at once, or after the async calls
   queued before it), agree with the other ranks (:mod:`.agree`): a bad
   argument on any rank, or ranks that disagree, make every rank raise a
   clear error instead of some ranks hanging. ``check=False`` skips it (one
   fewer latency-bound exchange per call), except where all-to-all needs the
   split sizes.
3. Pick the algorithm (``"auto"``), build the schedule, and run the call's
   body: copy the caller's tensors in, execute, copy the results out.
"""

from __future__ import annotations

import functools
import os
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from .. import auto, flight, loadstore, symmetric
from ..algorithms import Spec, canonical, channels, entry, schedule_for
from ..collectives import record
from ..errors import CollectiveTimeout, PeerError
from ..executor import execute, workspace
from ..ops import ReduceOp, combiner, op_dtype_error
from ..schedule import TMP, Schedule
from ..transport import (
    NotInGroup,
    Transport,
    TransportPeerError,
    TransportTimeout,
    capabilities,
    resolve_group,
)
from .agree import agree, check_splits, handshake, same_offset
from .checks import Checker
from .options import Options
from .work import Work, lane_for


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
    symmetric: bool = False  # the call's tensors are in symmetric memory, rendezvoused on this group


@dataclass
class Launch:
    transport: Transport
    meta: Meta
    schedule: Schedule
    options: Options
    fn: str
    splits: np.ndarray | None = field(default=None)
    checked_in_heap: bool = False  # the argument check met in symmetric memory (a barrier)

    def run(self, buffers: dict[int, torch.Tensor], as_given: bool = False) -> None:
        """Execute this rank's part of the schedule on flat ``buffers``: as reads
        of the peers' buffers where they all lie in symmetric memory, else by
        messages. ``as_given``: the buffers are the caller's tensors, unchanged
        since the call (in symmetric memory the check's barrier then suffices)."""
        combine = combiner(self.meta.op) if self.meta.op is not None else None
        found = _in_heap(self.transport, self.schedule, buffers) if self.meta.symmetric else None
        if found is not None:
            heap, offsets = found
            like = next(iter(buffers.values()))
            loadstore.execute(
                self.schedule,
                heap,
                offsets,
                like.dtype,
                combine,
                self.options.timeout,
                self.fn,
                ready=as_given and self.checked_in_heap,
            )
            return
        if TMP in self.schedule.buffers and TMP not in buffers:
            like = next(iter(buffers.values()))
            buffers[TMP] = scratch(
                int(self.schedule.buffers[TMP][self.transport.rank]), like, self.transport, "tmp"
            )
        execute(self.schedule, self.transport, buffers, combine, self.options.timeout, self.fn)


def _in_heap(transport, schedule: Schedule, buffers: dict):
    """``(handle, byte offset of each buffer)`` if every buffer the schedule
    uses lies in one symmetric block rendezvoused on ``transport`` (the same
    rendezvous on every rank of a call the ranks agreed is in symmetric memory;
    the offsets may differ from rank to rank); else None."""
    if TMP in schedule.buffers or not capabilities(transport).heap_loads:
        return None
    block, offsets = None, {}
    for buf, tensor in buffers.items():
        found = symmetric.block_of(tensor) if isinstance(tensor, torch.Tensor) else None
        if found is None or (block is not None and found[0] is not block):
            return None
        block, offsets[buf] = found
    heap = block.handles.get(transport) if block is not None else None
    return (heap, offsets) if heap is not None else None


def launch(
    fn: str,
    group,
    algorithm,
    options: dict,
    validate: Callable,
    body: Callable[[Launch], None],
    async_op: bool = False,
    outputs: Sequence[torch.Tensor] = (),
    heap_tensor: torch.Tensor | None = None,
) -> Work | None:
    """Check, agree, build the schedule and run ``body(launch)``, in the group's order.

    ``validate(checker, transport)`` checks this rank's arguments and returns
    its :class:`Meta`; it must not modify any tensor. Returns None, or with
    ``async_op`` a :class:`~mycollectives.api.work.Work` whose result is
    ``outputs``. A bad argument is raised before anything runs on the rank
    that made it, after the handshake has told the other ranks.
    ``heap_tensor`` is the tensor whose lying in symmetric memory lets the
    call run as loads and stores (:mod:`mycollectives.loadstore`).
    """
    opts, err = Options.parse(fn, options)
    t = _transport(fn, group, opts)
    if t is None:
        return None
    c = record(fn)
    meta, handle, err = _check(fn, t, algorithm, validate, heap_tensor, err)
    note = flight.posted(t, fn, algorithm, meta)

    def run_call() -> None:
        if t.device.type == "cuda":  # an async call runs on the lane's thread: its current device too
            torch.cuda.set_device(t.device)
        p, splits, checked = t.world_size, None, False
        needs_splits = c.split and not (meta is not None and meta.even)
        if p > 1 and (opts.check or needs_splits):
            table = handshake(t, fn, algorithm, meta, err, opts, handle)
            checked = handle is not None and same_offset(table)  # else loadstore publishes the offsets
            agree(fn, t.rank, table)
            if err is None and c.split:
                splits = check_splits(fn, t.rank, table)
        if err is not None:
            raise err
        if c.split and splits is None:  # split evenly on every rank: nothing to learn
            splits = np.tile(np.asarray(meta.in_splits, dtype=np.int64), (p, 1))
        schedule = _schedule(fn, t, c.name, algorithm, meta, opts, splits)
        body(Launch(t, meta, schedule, opts, fn, splits, checked))

    return lane_for(t).run(flight.track(note, run_call), async_op and err is None, outputs)


def _transport(fn: str, group, opts: Options) -> Transport | None:
    """The transport of ``group``, or None where this rank is not in it (warned, as torch does)."""
    try:
        return resolve_group(group, opts.timeout)
    except NotInGroup:
        warnings.warn(
            f"{fn}: this rank is not in the group, so the call does nothing (as in torch.distributed)",
            stacklevel=4,
        )
        return None
    except (ValueError, TypeError) as e:
        raise _on_rank(e, fn, _rank_hint()) from None
    except (TransportTimeout, TransportPeerError) as e:  # a transport's collective set-up
        kind = CollectiveTimeout if isinstance(e, TransportTimeout) else PeerError
        raise kind(f"{fn} on rank {_rank_hint()}: {e}") from e


def _check(fn: str, t: Transport, algorithm, validate: Callable, heap_tensor, err: Exception | None):
    """This rank's :class:`Meta`, its symmetric-memory handle, and the first
    problem with its arguments (raised later, once the other ranks know)."""
    meta, handle = None, None
    try:
        if err is not None:
            raise err
        if not isinstance(algorithm, str):
            raise TypeError(f"argument 'algorithm' must be a str, got {algorithm!r}")
        if algorithm != "auto":
            entry(canonical(fn), algorithm)  # raises for an unknown name
        meta = validate(Checker(fn, t.rank, t.world_size, None if t.local else t.device), t)
        handle = symmetric.handle_of(heap_tensor, t) if heap_tensor is not None else None
        meta.symmetric = handle is not None
        if meta.op is not None and (why := op_dtype_error(meta.op, meta.dtype)):
            raise TypeError(f"argument 'op': {why}")
        err = None
    except (ValueError, TypeError) as e:
        err = _on_rank(e, fn, t.rank)
    return meta, handle, err


def _schedule(fn, t, collective: str, algorithm: str, meta: Meta, opts: Options, splits) -> Schedule:
    """The schedule of the call: ``auto`` resolved, the options its algorithm reads set."""
    p = t.world_size
    itemsize = torch.empty(0, dtype=meta.dtype).element_size()
    call = {"root": meta.root, "segment_bytes": opts.segment_bytes}
    if splits is not None:
        call["splits"] = splits.tolist()
        nbytes = int(splits.sum(axis=1).max()) * itemsize  # auto ranks the even all-to-all of the busiest row
    else:
        call["count"] = meta.count
        nbytes = record(collective).size(Spec(collective, p, count=meta.count), itemsize)
    env = None if t.local else os.environ.get("LOCAL_WORLD_SIZE")
    call["local_size"] = opts.local_size or t.local_size or (int(env) if env else None)
    if algorithm == "auto":
        op = meta.op.value if meta.op is not None else None
        name = auto.resolve(
            collective,
            t,
            nbytes,
            itemsize=itemsize,
            heap=meta.symmetric,
            local_size=call["local_size"],
            op=op,
        )
    else:
        name = algorithm
    call["channels"] = opts.channels or channels.default(collective, nbytes, t)
    try:
        if splits is None:  # a call shape seen before costs a dictionary lookup
            return _cached_schedule(collective, name, p, itemsize, tuple(sorted(call.items())))
        return schedule_for(collective, name, p, itemsize=itemsize, **call)
    except ValueError as e:
        raise ValueError(f"{fn} on rank {t.rank}: {e}") from None


@functools.lru_cache(maxsize=1024)
def _cached_schedule(collective: str, name: str, p: int, itemsize: int, call: tuple) -> Schedule:
    return schedule_for(collective, name, p, itemsize=itemsize, **dict(call))


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


def scratch(
    numel: int, like: torch.Tensor, transport=None, slot: str = "work", in_heap: bool = False
) -> torch.Tensor:
    """Working memory for one call: fresh, or, given the ``transport``, the
    executor's reusable :func:`~mycollectives.executor.workspace`; with
    ``in_heap``, in symmetric memory (every rank of a call the ranks agreed is in
    symmetric memory asks for the same, so the first such call rendezvouses it)."""
    if in_heap:
        return symmetric.workspace(transport, slot, numel, like.dtype)
    if transport is None:
        return torch.empty(numel, dtype=like.dtype, device=like.device)
    return workspace(transport, slot, numel, like)
