"""Meshes of ranks, their subgroups, and a communication stream (chapter 5).

A :class:`Mesh` lays the ranks of a group out on a grid with named axes,
outermost first, as ``torch.distributed``'s ``DeviceMesh`` does: in
``Mesh({"dp": 2, "tp": 4})`` rank ``r`` sits at ``dp = r // 4, tp = r % 4``,
so the ranks of one ``tp`` group are consecutive (on one node) and those of
a ``dp`` group are 4 apart. ``mesh.group("tp")`` is this rank's
subgroup along that axis (the parent transport's ``subgroup()``): a
transport that any collective of the package accepts as ``group=``.

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

from ..transport import SubGroup, TransportBase, resolve_group

__all__ = ["STREAM_TAGS", "Mesh", "Stream", "SubGroup"]

STREAM_TAGS = 1 << 16  # tag space of one stream: axes are numbered inside it


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
        self._groups: dict[tuple, TransportBase] = {}

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

    def group(self, *axes: str, stream: int = 0) -> TransportBase:
        """This rank's subgroup along ``axes`` (one or several), on ``stream``."""
        for a in axes:
            self._axis(a)
        key = (axes, stream)
        if key not in self._groups:
            index = sum(1 << self.names.index(a) for a in axes)
            self._groups[key] = self.parent.subgroup(self.members(*axes), tag=stream * STREAM_TAGS + index)
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
