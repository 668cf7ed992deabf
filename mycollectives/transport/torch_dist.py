"""A transport over ``torch.distributed``: gloo on CPUs, NCCL on GPUs, or any backend.

Ranks are those of the process group (a subgroup's rank 0 is its first
member); :meth:`group_rank` translates the global ranks that
``torch.distributed``'s own API takes. Under NCCL a round's sends and
receives go out together through ``batch_isend_irecv``: posted one at a time
they can deadlock, since NCCL runs them in order on one stream. Buffers live
on ``cuda:LOCAL_RANK`` there, on the CPU otherwise.

Waiting under NCCL is what torch.distributed's ``work.wait()`` does (the
current CUDA stream waits for NCCL's, the CPU does not block), then a CUDA
event recorded behind it tells the CPU when the round is done: checked in a
short spin (a small message is done in microseconds), then slept on in the
driver (``blocking=True``: cudaEventBlockingSync) by a helper thread, so that
a peer that never answers ends in :class:`TransportTimeout` naming it, not in
a hang. Nothing sleeps for a fixed interval.
"""

from __future__ import annotations

import datetime
import os
import queue
import threading
import time
import weakref

import torch
import torch.distributed as dist

from ..flight.ident import job_id
from .base import NotInGroup, TransportBase, TransportPeerError, TransportTimeout
from .message import COLLECTIVE_TAG, Label, Message
from .timeouts import env_timeout

DEFAULT_TIMEOUT = 300.0
# How long a wait checks its CUDA event in a loop before sleeping on it.
SPIN_SECONDS = float(os.environ.get("MYCOLLECTIVES_SPIN_US", "200")) * 1e-6


class TorchDistTransport(TransportBase):
    """One rank's end of a torch process group (its tags are C ints: ``tag_limit``).

    ``batched`` posts each round through ``batch_isend_irecv`` and polls for
    completion (the NCCL path); it is on for NCCL and can be turned on for
    any backend, which is how the tests run the NCCL code path on gloo.
    """

    tag_limit = 1 << 31

    def __init__(self, group=None, timeout: float | None = None, batched: bool | None = None):
        if not dist.is_available() or not dist.is_initialized():
            raise ValueError(
                "torch.distributed is not initialized: call torch.distributed.init_process_group() "
                "first, or run inside mycollectives.run_local"
            )
        # a weak reference: a transport must not keep its process group alive
        # past destroy_process_group() (gloo's threads would then be torn down
        # at interpreter exit, which aborts the process now and then)
        self._group = weakref.ref(group if group is not None else dist.group.WORLD)
        self.rank = dist.get_rank(self.group)
        if self.rank < 0:
            raise NotInGroup("this process is not a member of the given process group")
        self.local = False
        self.world_size = dist.get_world_size(self.group)
        self.backend = str(dist.get_backend(self.group)).lower()
        self.nccl = self.backend == "nccl"
        self.batched = self.nccl if batched is None else batched
        self.timeout = float(timeout or env_timeout(DEFAULT_TIMEOUT))
        self._global = [dist.get_global_rank(self.group, r) for r in range(self.world_size)]
        self._group_of = {g: r for r, g in enumerate(self._global)}
        self.waiter = _Waiter()  # started on the first wait that outlasts the spin (NCCL only)
        if self.nccl:
            self.device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", torch.cuda.current_device())))
        else:
            self.device = torch.device("cpu")

    @property
    def group(self):
        group = self._group()
        if group is None:
            raise ValueError("this transport's process group has been destroyed")
        return group

    def group_rank(self, rank: int) -> int:
        try:
            return self._group_of[rank]
        except (KeyError, TypeError):
            raise ValueError(f"rank {rank!r} is not a member of this process group") from None

    def describe(self) -> tuple[str, int, str, list[int]]:
        try:
            ranks, owner = dist.get_process_group_ranks(self.group), dist.get_rank()
            name = "default" if self.group is dist.group.WORLD else str(self.group.group_name)
        except (RuntimeError, ValueError, KeyError):  # a group torch's state here does not know
            return super().describe()
        return job_id(), owner, name, ranks

    def isend(self, tensor, dst, tag=0, label=None):
        # the process group's own send: ``dst`` is already a group rank, and the
        # checks and rank translations of ``dist.isend`` cost CPU per message
        # (measured: about a fifth of a small message's process time on gloo)
        return _DistWork(_post(self.group.send, tensor, dst, tag), self, dst)

    def irecv(self, tensor, src, tag=0, label=None):
        return _DistWork(_post(self.group.recv, tensor, src, tag), self, src)

    def exchange(self, sends: list[Message], recvs: list[Message], label: Label):
        if not self.batched:
            recv_works = [self.irecv(m.tensor, m.peer, COLLECTIVE_TAG) for m in recvs]
            send_works = [self.isend(m.tensor, m.peer, COLLECTIVE_TAG) for m in sends]
            return send_works, recv_works
        ops = [
            dist.P2POp(dist.irecv, m.tensor, self._global[m.peer], self.group, COLLECTIVE_TAG) for m in recvs
        ]
        ops += [
            dist.P2POp(dist.isend, m.tensor, self._global[m.peer], self.group, COLLECTIVE_TAG) for m in sends
        ]
        if not ops:
            return [], []
        try:
            works = dist.batch_isend_irecv(ops)
        except RuntimeError as e:
            raise TransportPeerError(_first_line(e)) from e
        # NCCL coalesces the batch: wait for all of it through one handle,
        # named after the peers it waits on (those it receives from first)
        peers = list(dict.fromkeys([m.peer for m in recvs] + [m.peer for m in sends]))
        shared = _DistWork(works[-1], self, peers[0], extra=works[:-1], peers=peers)
        return [shared] * len(sends), [shared] * len(recvs)


def _first_line(e: BaseException) -> str:
    return str(e).splitlines()[0][:300] if str(e) else type(e).__name__


def _post(call, tensor, peer: int, tag: int):
    """``group.send`` or ``group.recv``, a failure of the peer's connection
    (gloo raises it at once when the peer is gone) named as the peer's."""
    try:
        return call([tensor], peer, tag)
    except RuntimeError as e:
        raise TransportPeerError(_first_line(e), peer=peer) from e


class _DistWork:
    def __init__(self, work, transport: TorchDistTransport, peer, extra=(), peers=None):
        self.work, self.transport, self.peer, self.extra = work, transport, peer, extra
        self.peers = peers if peers is not None else [peer]
        self.done = False

    def is_completed(self) -> bool:
        return self.done or self.work.is_completed()

    def wait(self, timeout: float | None = None) -> bool:
        if self.done:
            return True
        timeout = timeout or self.transport.timeout
        try:
            if self.transport.nccl:
                for w in (self.work, *self.extra):
                    w.wait()  # the current stream waits for NCCL's; the CPU goes on
                event = torch.cuda.Event(blocking=True)  # its waiter sleeps in the driver
                event.record(torch.cuda.current_stream(self.transport.device))
                if not completes(event, timeout, self.transport.waiter):
                    raise TransportTimeout(
                        f"no completion after {timeout:g} s (waiting on ranks {self.peers})", peer=self.peer
                    )
                for w in (self.work, *self.extra):
                    w.wait()  # done now: raises the error NCCL recorded for it, if any
            else:  # gloo marks p2p work complete only inside wait(timeout)
                for w in (self.work, *self.extra):
                    w.wait(datetime.timedelta(seconds=timeout))
        except RuntimeError as e:
            text = str(e)
            if "imed out" in text or "imeout" in text:
                raise TransportTimeout(f"no completion after {timeout:g} s", peer=self.peer) from e
            raise TransportPeerError(_first_line(e), peer=self.peer) from e
        self.done = True
        return True


def completes(event, timeout: float, waiter: _Waiter, spin: float | None = None) -> bool:
    """Whether ``event`` (a CUDA event, or anything with ``query()`` and a
    blocking ``synchronize()``) completes within ``timeout`` seconds: checked
    for ``spin`` seconds (:data:`SPIN_SECONDS`), then slept on by ``waiter``'s thread."""
    spin = SPIN_SECONDS if spin is None else spin
    start = time.perf_counter()
    while not event.query():
        if time.perf_counter() - start >= min(spin, timeout):
            return waiter.wait(event, timeout - (time.perf_counter() - start))
    return True


class _Waiter:
    """A daemon thread that sleeps on events (``synchronize()``) and wakes the
    rank that waits for each; a wait that times out leaves it behind (its
    event may never complete) and the next wait starts a fresh one."""

    def __init__(self):
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue | None = None

    def wait(self, event, timeout: float) -> bool:
        done = threading.Event()
        with self._lock:
            if self._jobs is None:
                self._jobs = queue.SimpleQueue()
                threading.Thread(
                    target=_serve, args=(self._jobs,), daemon=True, name="mycollectives-wait"
                ).start()
            jobs = self._jobs
        jobs.put((event, done))
        if done.wait(max(timeout, 0.0)):
            return True
        with self._lock:
            if self._jobs is jobs:
                self._jobs = None  # that thread may be stuck on this event for good
        return False


def _serve(jobs: queue.SimpleQueue) -> None:
    while True:
        event, done = jobs.get()
        try:
            event.synchronize()
        finally:
            done.set()
