"""A transport for processes on one host: the bytes go through shared memory.

Over gloo, every byte between two local processes crosses loopback TCP: the
sender's kernel copies it into a socket buffer, the receiver's copies it
out, and a large message wakes the receiver many times on the way. This
transport does what NCCL's SHM transport does within a node: the sender
copies a message into a shared-memory region that the receiver maps, and
only a small *token* (which region, where, how many bytes) goes to the
receiver, through its *doorbell*, a pipe that also wakes it. The receiver
reads the bytes where they lie (or copies them out) and records that it has
read them, so the sender may reuse the space. The files and that
bookkeeping are in ``shm_regions.py``, the doorbells in ``shm_bells.py``
(which says why a pipe and not the process group); this module is the
protocol.

* Every message of a collective (the collectives' tag) goes through shared
  memory (from ``eager_bytes`` up, 1 by default); a user's own send and
  receive (any other tag), and smaller messages if ``eager_bytes`` is
  raised, go through the process group as they are.
* Setting up is collective (every rank of the group), under a timeout: the
  ranks agree on the names of their files and check that they share a host
  (``shm_setup.py``, which also says how files leave ``/dev/shm`` whichever
  way a process ends). Constructing the transport starts the set-up on a
  thread of its own and returns: the first call that needs the doorbells
  waits for it (on the worker of an ``async_op=True`` call, which returns at
  once), so new groups may be first used in any order, each set-up going on
  while the others wait.
* Each sender owns its regions (files in ``/dev/shm``, one growing set per
  peer) and names them with a random number of its own, which the token
  carries: two jobs, or two transports of one job, never share a file. The receiver unlinks a file as soon as it has mapped it
  (the memory lives while either end maps it), so a crash leaves at most
  the files created since the last message was read. Closing a sender
  (or its exit) unlinks the files no peer has mapped yet, after giving the
  peers a few seconds to map them: a send completes when its token leaves,
  so the receiver may still be a moment behind.
* Sending never waits for the receiver: when the current region is still
  in use, a new one is created. A receive waits only for its token, under
  the transport's timeout, so a missing peer gives the executor's error
  that names the round and the peer.
* Every token carries the sender's host identity, checked again on
  arrival: a rank on another host is refused with an error that says so.

Select it with ``MYCOLLECTIVES_TRANSPORT=shm`` (every rank), by passing
``ShmTransport(group)`` as the ``group`` of a call, or with the benchmark's
``--transport shm``.
"""

from __future__ import annotations

import os
import random
import threading
import weakref

import torch

from ..errors import CollectiveTimeout, PeerError
from .base import TransportBase, TransportPeerError, TransportTimeout
from .contract import Capabilities
from .message import COLLECTIVE_TAG, Done, Label, Message
from .shm_bells import Doorbells
from .shm_regions import Inbox, Outbox, host_id, stem, unlink_all
from .shm_setup import on_sigterm, sweep
from .torch_dist import TorchDistTransport

DEFAULT_EAGER_BYTES = 1  # every message with a byte in it: a doorbell costs less than gloo's send
CLOSE_GRACE_S = 5.0  # how long close() waits for peers to map what they were sent


class ShmTransport(TransportBase):
    """One rank's end of a process group whose ranks share a host, with the
    bytes of large messages moved through shared memory (see the module)."""

    local = False
    capabilities = Capabilities(messages=True, heap_loads=True, read_in_place=True)

    def __init__(
        self,
        group=None,
        timeout: float | None = None,
        eager_bytes: int | None = None,
        setup_timeout: float | None = None,
    ):
        sweep()  # files that ranks killed without cleaning up left behind
        self.inner = TorchDistTransport(group, timeout, batched=False)
        if self.inner.nccl:
            raise ValueError("ShmTransport moves CPU tensors; under NCCL use the process group's transport")
        self.rank, self.world_size = self.inner.rank, self.inner.world_size
        self.timeout, self.device = self.inner.timeout, self.inner.device
        self.batched = False
        env = os.environ.get("MYCOLLECTIVES_SHM_EAGER_BYTES", str(DEFAULT_EAGER_BYTES))
        self.eager_bytes = max(1, int(eager_bytes if eager_bytes is not None else env))
        self.nonce = random.SystemRandom().getrandbits(62)
        self.host = host_id()
        self.paths: set[str] = set()
        self._out: dict[int, Outbox] = {}
        self._in: dict[int, Inbox] = {}
        self._bells: Doorbells | None = None  # set up on a thread of its own (see the module)
        self._setup_timeout = setup_timeout or self.timeout
        self._setup_error: BaseException | None = None
        self._setup_done = threading.Event()
        threading.Thread(target=self._set_up, name="mycollectives-shm-set-up", daemon=True).start()
        self._finalizer = weakref.finalize(self, unlink_all, self.paths, CLOSE_GRACE_S)
        on_sigterm(self)

    def close(self, grace: float = CLOSE_GRACE_S) -> None:
        """Unlink every file this end created that its peers have not mapped
        (done anyway when the transport is freed or the process exits
        normally). Waits up to ``grace`` seconds for peers to map what they
        were sent: a peer a moment behind still reads the last message."""
        if self._finalizer.alive:
            self._finalizer.detach()
            unlink_all(self.paths, grace)
        if self._bells is not None:
            self._bells.close()

    @property
    def bells(self) -> Doorbells:
        """The doorbells, once the set-up (started at construction) is done."""
        return self._bells or self._ready()

    def point_to_point(self) -> TorchDistTransport:
        """The process group's own send and receive (a rendezvous's rows go there)."""
        return self.inner

    def describe(self) -> tuple[str, int, str, list[int]]:
        return self.inner.describe()

    def settled(self) -> None:
        """Wait until the set-up's messages are done: for a caller about to
        exchange set-up messages of its own through the same group (the
        symmetric heap's rendezvous), which must not cross them."""
        self._setup_done.wait()

    def _set_up(self) -> None:
        """The collective set-up, on its own thread (see the module)."""
        try:
            self._bells = Doorbells(self.inner, self.host, self._setup_timeout)
        except BaseException as e:  # noqa: BLE001 - raised by the first call that needs the doorbells
            self._setup_error = e
        finally:
            self._setup_done.set()

    def _ready(self, label: Label | None = None) -> Doorbells:
        """Wait for the set-up (it has its own timeout); its failure is the
        package's error, naming the call (``label``) that needed it."""
        self._setup_done.wait()
        if self._bells is not None:
            return self._bells
        e, where = self._setup_error, f"rank {self.rank}"
        if label is not None:
            where = f"{label.collective} ({label.algorithm}) on rank {self.rank}, round {label.round}"
        if isinstance(e, TransportTimeout):
            raise CollectiveTimeout(f"{where}: {e}") from e
        if str(e).startswith("shared-memory set-up"):  # it says which step and which rank
            raise PeerError(f"{where}: {e}") from e
        who = f"rank {e.peer} failed: " if isinstance(e, TransportPeerError) and e.peer is not None else ""
        raise PeerError(f"{where}: shared-memory set-up: {who}{e}") from e

    @property
    def key(self) -> int:
        """The number the ranks agreed on, which names every file of this transport."""
        return self.bells.key

    def group_rank(self, rank: int) -> int:
        return self.inner.group_rank(rank)

    def _shared(self, tensor: torch.Tensor, tag: int) -> bool:
        """Whether a message goes through shared memory: decided from what
        both ends know alike (its size and tag)."""
        return tag == COLLECTIVE_TAG and tensor.numel() * tensor.element_size() >= self.eager_bytes

    def isend(self, tensor: torch.Tensor, dst: int, tag: int = 0, label: Label | None = None):
        if not self._shared(tensor, tag):
            return self.inner.isend(tensor, dst, tag, label)
        out = self._out.get(dst)
        if out is None:
            out = self._out[dst] = Outbox(stem(self.key, self.rank, self.nonce, dst), self.paths)
        nbytes = tensor.numel() * tensor.element_size()
        region, offset, seq = out.place(nbytes)
        region.data[offset : offset + nbytes].view(tensor.dtype).view(tensor.shape).copy_(tensor)
        self.bells.ring(
            dst, (self.rank, seq, region.gen, offset, nbytes, self.nonce, self.host, out.oldest())
        )
        return Done()  # the bytes are in place: the receiver needs nothing more from us

    def irecv(self, tensor: torch.Tensor, src: int, tag: int = 0, label: Label | None = None):
        if not self._shared(tensor, tag):
            return self.inner.irecv(tensor, src, tag, label)
        return _ShmRecv(self, tensor, src, self.bells.ticket(src))

    def held(self, work, timeout: float | None = None) -> torch.Tensor | None:
        """A large message where it lies in shared memory; None for a small one (see ``contract``)."""
        return work.view(timeout) if isinstance(work, _ShmRecv) else None

    def release(self, work) -> None:
        work.release()

    def exchange(self, sends: list[Message], recvs: list[Message], label: Label):
        if self._bells is None:
            self._ready(label)
        recv_works = [self.irecv(m.tensor, m.peer, COLLECTIVE_TAG, label) for m in recvs]
        send_works = [self.isend(m.tensor, m.peer, COLLECTIVE_TAG, label) for m in sends]
        return send_works, recv_works

    def locate(self, src: int, token: tuple, like: torch.Tensor) -> tuple[torch.Tensor, Inbox, int]:
        """Where the message a token announces lies: a view of shared memory
        shaped like ``like``, its sender's inbox and its seq."""
        _, seq, gen, offset, nbytes, nonce, host, oldest = token
        if host != self.host:
            raise TransportPeerError(
                f"rank {src} is on another host: ShmTransport needs every rank of the group on one host",
                peer=src,
            )
        want = like.numel() * like.element_size()
        if nbytes != want:
            raise TransportPeerError(f"rank {src} sent {nbytes} bytes where {want} were expected", peer=src)
        inbox = self._in.get(src)
        if inbox is None or inbox.nonce != nonce:  # a new sender transport: count afresh
            inbox = self._in[src] = Inbox(nonce, stem(self.key, src, nonce, self.rank))
        try:
            region = inbox.region(gen, oldest)
        except OSError as e:
            raise TransportPeerError(
                f"cannot map rank {src}'s shared memory {inbox.stem}-{gen}: {e}", peer=src
            ) from e
        return region[offset : offset + nbytes].view(like.dtype).view(like.shape), inbox, seq


class _ShmRecv:
    """A receive through shared memory: its token first (the ``ticket``-th
    from ``src``), then the bytes.

    ``wait()`` copies them into the receive tensor. ``view()`` instead
    returns them where they lie, for a caller that only reads them once
    (the executor reduces straight from there, saving a copy); it must call
    ``release()`` when done, which lets the sender reuse the space.
    """

    def __init__(self, transport: ShmTransport, tensor, src: int, ticket: int):
        self.transport, self.tensor, self.src, self.ticket = transport, tensor, src, ticket
        self.done = False
        self._held = None

    def is_completed(self) -> bool:
        return self.done

    def view(self, timeout: float | None = None) -> torch.Tensor:
        if self._held is None:
            token = self.transport.bells.take(self.src, self.ticket, timeout or self.transport.timeout)
            self._held = self.transport.locate(self.src, token, self.tensor)
        return self._held[0]

    def release(self) -> None:
        if self._held is not None and not self.done:
            _, inbox, seq = self._held
            inbox.consumed(seq)
            self.done = True

    def wait(self, timeout: float | None = None) -> bool:
        if not self.done:
            self.tensor.copy_(self.view(timeout))
            self.release()
        return True
