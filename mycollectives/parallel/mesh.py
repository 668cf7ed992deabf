"""Meshes of ranks, their subgroups, and a communication stream (chapter 5).

A :class:`Mesh` lays the ranks of a group out on a grid with named axes,
outermost first, as ``torch.distributed``'s ``DeviceMesh`` does: in
``Mesh({"dp": 2, "tp": 4})`` rank ``r`` sits at ``dp = r // 4, tp = r % 4``,
so the ranks of one ``tp`` group are consecutive (on one node) and those of
a ``dp`` group are 4 apart. ``mesh.group("tp")`` is this rank's
:class:`SubGroup` along that axis: a transport that any collective of the
package accepts as ``group=``.

A ``Stream`` runs communication in a background thread, in order, the
way a CUDA stream runs NCCL kernels beside the compute stream: FSDP's
prefetch and DDP's overlapped buckets are calls put on a stream. Calls on
different streams may be in flight at once, so each stream talks through
subgroups of its own (``mesh.group(axis, stream=1)``), whose messages carry
a tag of their own and never mix with another stream's.

>>> def where(rank):
...     mesh = Mesh({"dp": 2, "tp": 2})
...     return mesh.coords(), mesh.group("tp").members, mesh.group("dp").members
>>> mc.run_local(where, 4)[3]
({'dp': 1, 'tp': 1}, (2, 3), (1, 3))
"""

from __future__ import annotations

import math
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future

import torch

from ..transport import Label, Message, resolve_group

STREAM_TAGS = 1 << 16  # tag space of one stream: axes are numbered inside it


class SubGroup:
    """The ranks ``members`` of a ``parent`` transport, renumbered ``0 .. len - 1``.

    ``members`` are ranks of the parent, in the order the subgroup numbers
    them. Messages go through the parent with tag ``tag`` added, so two
    subgroups that share ranks (or one subgroup on two streams) never take
    each other's messages.
    """

    def __init__(self, parent, members, tag: int = 0):
        self.parent = resolve_group(parent)
        self.members = tuple(int(m) for m in members)
        if len(set(self.members)) != len(self.members):
            raise ValueError(f"SubGroup on rank {self.parent.rank}: members {self.members} repeat a rank")
        bad = [m for m in self.members if not 0 <= m < self.parent.world_size]
        if bad:
            raise ValueError(
                f"SubGroup on rank {self.parent.rank}: members {bad} are not ranks of a group of "
                f"{self.parent.world_size}"
            )
        if self.parent.rank not in self.members:
            raise ValueError(
                f"SubGroup on rank {self.parent.rank}: rank {self.parent.rank} is not one of the members "
                f"{self.members}"
            )
        self._index = {m: i for i, m in enumerate(self.members)}
        self.rank = self._index[self.parent.rank]
        self.world_size = len(self.members)
        self.device = self.parent.device
        self.tag = int(tag)

    def __getattr__(self, name: str):
        if name in ("backend", "nccl", "batched", "local"):  # what the API asks of its parent transport
            return getattr(self.parent, name)
        raise AttributeError(name)

    @property
    def timeout(self) -> float:
        return self.parent.timeout

    def __repr__(self) -> str:
        return f"SubGroup(rank {self.rank} of {self.members}, tag {self.tag})"

    def group_rank(self, rank: int) -> int:
        """This subgroup's number for a rank the caller names as the parent does."""
        r = self.parent.group_rank(rank)
        if r not in self._index:
            raise ValueError(f"rank {rank} is not a member of this subgroup {self.members}")
        return self._index[r]

    def isend(self, tensor: torch.Tensor, dst: int, tag: int = 0, label: Label | None = None):
        return self.parent.isend(tensor, self.members[dst], self.tag + tag, label)

    def irecv(self, tensor: torch.Tensor, src: int, tag: int = 0, label: Label | None = None):
        return self.parent.irecv(tensor, self.members[src], self.tag + tag, label)

    def exchange(self, sends: list[Message], recvs: list[Message], label: Label):
        if getattr(self.parent, "batched", False):  # NCCL: one batch through the parent (no tags there)
            out = [Message(m.tensor, self.members[m.peer], m.pieces) for m in sends]
            inn = [Message(m.tensor, self.members[m.peer], m.pieces) for m in recvs]
            return self.parent.exchange(out, inn, label)
        recv_works = [self.irecv(m.tensor, m.peer, 0, label) for m in recvs]
        send_works = [self.isend(m.tensor, m.peer, 0, label) for m in sends]
        return send_works, recv_works


class Mesh:
    """This rank's place on a grid of named axes (outermost first) over ``group``.

    ``shape`` maps axis names to sizes whose product is the group's size.
    """

    def __init__(self, shape: dict[str, int], group=None):
        self.parent = resolve_group(group)
        self.shape = dict(shape)
        for name, size in self.shape.items():
            if not isinstance(size, int) or size < 1:
                raise ValueError(
                    f"Mesh on rank {self.parent.rank}: axis {name!r} has size {size!r}; expected a positive int"
                )
        if math.prod(self.shape.values()) != self.parent.world_size:
            raise ValueError(
                f"Mesh on rank {self.parent.rank}: axes {self.shape} hold {math.prod(self.shape.values())} ranks, "
                f"but the group has {self.parent.world_size}"
            )
        self.names = tuple(self.shape)
        self.strides = {}
        stride = 1
        for name in reversed(self.names):
            self.strides[name] = stride
            stride *= self.shape[name]
        self._groups: dict[tuple, SubGroup] = {}

    @property
    def rank(self) -> int:
        return self.parent.rank

    def coords(self, rank: int | None = None) -> dict[str, int]:
        """The coordinates of ``rank`` (this rank by default) on every axis."""
        r = self.rank if rank is None else rank
        return {n: (r // self.strides[n]) % self.shape[n] for n in self.names}

    def coord(self, axis: str) -> int:
        return self.coords()[self._axis(axis)]

    def members(self, *axes: str) -> tuple[int, ...]:
        """The ranks that differ from this one only along ``axes`` (the last axis fastest)."""
        for a in axes:
            self._axis(a)
        base = self.rank - sum(self.coords()[a] * self.strides[a] for a in axes)
        out = [base]
        for a in reversed(axes):
            out = [r + i * self.strides[a] for i in range(self.shape[a]) for r in out]
        return tuple(sorted(out))

    def group(self, *axes: str, stream: int = 0) -> SubGroup:
        """This rank's subgroup along ``axes`` (one or several), on ``stream``."""
        for a in axes:
            self._axis(a)
        key = (axes, stream)
        if key not in self._groups:
            index = sum(1 << self.names.index(a) for a in axes)
            self._groups[key] = SubGroup(self.parent, self.members(*axes), tag=stream * STREAM_TAGS + index)
        return self._groups[key]

    def _axis(self, axis: str) -> str:
        if axis not in self.shape:
            raise ValueError(f"Mesh on rank {self.rank}: no axis {axis!r}; the axes are {self.names}")
        return axis


class Stream:
    """Runs calls one after another in a background thread; ``submit`` returns a future.

    ``with Stream() as s:`` waits for every call before leaving. A call
    that raises makes its future raise, and ``close`` re-raises the first
    such error that nobody collected. On a local world, a rank's main thread
    computes or waits for futures while its streams talk: the world's deadlock
    detector follows one waiting thread per rank, so two threads of a rank
    waiting on messages at once can be mistaken for a deadlock.
    """

    def __init__(self, name: str = "comm"):
        self._calls: queue.Queue = queue.Queue()
        self._futures: list[Future] = []
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            item = self._calls.get()
            if item is None:
                return
            fn, args, fut = item
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                fut.set_result(fn(*args))
            except BaseException as e:  # noqa: BLE001 - handed to the future
                fut.set_exception(e)

    def submit(self, fn: Callable, *args) -> Future:
        fut: Future = Future()
        self._futures.append(fut)
        self._calls.put((fn, args, fut))
        return fut

    def synchronize(self) -> None:
        """Wait for every call submitted so far (and raise the first error)."""
        for fut in self._futures:
            fut.result()
        self._futures.clear()

    def close(self) -> None:
        try:
            self.synchronize()
        finally:
            self._calls.put(None)
            self._thread.join()

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
