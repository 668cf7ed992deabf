"""A transport for processes on one host: the bytes go through shared memory.

Over gloo, every byte between two local processes crosses loopback TCP: the
sender's kernel copies it into a socket buffer, the receiver's copies it
out, and a large message wakes the receiver many times on the way. This
transport does what NCCL's SHM transport does within a node: the sender
copies a message into a shared-memory region that the receiver maps, and
only a small *token* (which region, where, how many bytes) travels through
the process group, which also wakes the receiver. The receiver copies the
bytes out and records that it has consumed them, so the sender may reuse
the space.

* Messages under ``eager_bytes`` (and any message with a tag other than 0)
  go through the process group as they are: a token would cost as much.
* Each sender owns its regions (files in ``/dev/shm``, one growing set per
  peer) and names them with a random number of its own, which the token
  carries: no set-up call, no collective, and two jobs on one host never
  share a file. The receiver unlinks a file as soon as it has mapped it
  (the memory lives while either end maps it), so a crash leaves at most
  the files created since the last message was read.
* Sending never waits for the receiver: when the current region is still
  in use, a new one is created. A receive waits only for its token, under
  the transport's timeout, so a missing peer gives the executor's error
  that names the round and the peer.
* Every token carries the sender's host identity: a rank on another host is
  refused with an error that says so.

Select it with ``MYCOLLECTIVES_TRANSPORT=shm`` (every rank), by passing
``ShmTransport(group)`` as the ``group`` of a call, or with the benchmark's
``--transport shm``.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
import socket
import weakref

import torch

from .base import Label, Message, TransportPeerError
from .torch_dist import TorchDistTransport

SHM_DIR = "/dev/shm"
DEFAULT_EAGER_BYTES = 64 << 10
MIN_REGION_BYTES = 4 << 20
MAX_REGIONS = 4  # per peer, kept for reuse
ALIGN = 64  # bytes: every message starts on a cache line (and any dtype's alignment)
TOKEN = 7  # int64s: seq, generation, offset, nbytes, sender nonce, sender host, oldest live generation


def host_id() -> int:
    """This host, as a 62-bit number (machine and boot, so containers that
    share a host name on different machines still differ)."""
    boot = ""
    with contextlib.suppress(OSError):
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
    digest = hashlib.blake2b(f"{socket.gethostname()}/{boot}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 2


def _map(path: str, nbytes: int | None = None) -> torch.Tensor:
    """A file of ``/dev/shm`` as a shared uint8 tensor: created with
    ``nbytes`` if given, else opened at its current size."""
    if nbytes is not None:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.ftruncate(fd, nbytes)
        finally:
            os.close(fd)
    else:
        nbytes = os.path.getsize(path)
    return torch.from_file(path, shared=True, size=nbytes, dtype=torch.uint8)


def _unlink(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def _unlink_all(paths: set) -> None:
    for p in list(paths):
        _unlink(p)
    paths.clear()


class _Region:
    """One shared file a sender writes messages into, from offset 0 up."""

    def __init__(self, path: str, gen: int, nbytes: int):
        self.path, self.gen = path, gen
        self.data = _map(path, nbytes)
        self.head = 0  # the next free byte
        self.first = self.last = 0  # seq of the first and last message placed here


class _Outbox:
    """A sender's side of one peer: its regions, and the peer's count of
    messages consumed (in a small shared file that the peer writes)."""

    def __init__(self, owner: ShmTransport, peer: int):
        self.owner, self.peer = owner, peer
        self.stem = owner.stem(owner.nonce, owner.rank, peer)
        self.seq = 0
        self.gens = 0
        self.regions: list[_Region] = []
        self.ctl_path = f"{self.stem}-ctl"
        self.ctl = _map(self.ctl_path, 4096).view(torch.int64)
        owner.paths.add(self.ctl_path)

    def place(self, nbytes: int) -> tuple[_Region, int, int]:
        """Where the next message of ``nbytes`` goes: (region, offset, seq).

        The current region while it has room; else a region the peer has
        read completely (its pages are already mapped: no page faults); else
        a new one, sized for the message (at least ``MIN_REGION_BYTES``).
        """
        consumed = int(self.ctl[0])
        self._unlink_mapped(consumed)
        self.seq += 1
        need = -(-nbytes // ALIGN) * ALIGN
        cur = self.regions[-1] if self.regions else None
        if cur is None or cur.head + need > cur.data.numel():
            cur = next((r for r in self.regions if consumed >= r.last and r.data.numel() >= need), None)
            if cur is not None:
                self.regions.remove(cur)
                cur.head = 0
            else:
                cur = _Region(f"{self.stem}-{self.gens}", self.gens, max(MIN_REGION_BYTES, need))
                self.owner.paths.add(cur.path)
                self.gens += 1
                cur.first = self.seq
            self.regions.append(cur)
        offset, cur.head, cur.last = cur.head, cur.head + need, self.seq
        extra = len(self.regions) - MAX_REGIONS  # beyond that, the oldest read regions go
        for r in [r for r in self.regions[:-1] if consumed >= r.last][: max(0, extra)]:
            self.regions.remove(r)
        return cur, offset, self.seq

    def _unlink_mapped(self, consumed: int) -> None:
        """Unlink the files the peer has mapped (it has read from them): the
        memory stays while either side maps it, and nothing is left behind."""
        paths = self.owner.paths
        if consumed >= 1 and self.ctl_path in paths:
            _unlink(self.ctl_path)
            paths.discard(self.ctl_path)
        for r in self.regions:
            if consumed >= r.first and r.path in paths:
                _unlink(r.path)
                paths.discard(r.path)


class _Inbox:
    """A receiver's side of one peer: the regions it has mapped and the
    count of messages consumed, kept in order (a later message read first
    does not count until the earlier ones are read too)."""

    def __init__(self, nonce: int):
        self.nonce = nonce  # the sender's transport: a new one starts counting afresh
        self.maps: dict[int, torch.Tensor] = {}
        self.ctl: torch.Tensor | None = None
        self.next = 1
        self.done: set[int] = set()

    def consumed(self, seq: int, owner: ShmTransport, src: int) -> None:
        """Message ``seq`` has been read: publish the count read in order
        (after the read itself, so the sender never reuses bytes still read)."""
        self.done.add(seq)
        while self.next in self.done:
            self.done.discard(self.next)
            self.next += 1
        if self.ctl is None:
            path = f"{owner.stem(self.nonce, src, owner.rank)}-ctl"
            self.ctl = _map(path).view(torch.int64)
            _unlink(path)
        self.ctl[0] = self.next - 1


class ShmTransport:
    """One rank's end of a process group whose ranks share a host, with the
    bytes of large messages moved through shared memory (see the module)."""

    def __init__(self, group=None, timeout: float | None = None, eager_bytes: int | None = None):
        self.inner = TorchDistTransport(group, timeout, batched=False)
        if self.inner.nccl:
            raise ValueError("ShmTransport moves CPU tensors; under NCCL use the process group's transport")
        self.rank, self.world_size = self.inner.rank, self.inner.world_size
        self.timeout, self.device = self.inner.timeout, self.inner.device
        self.backend = f"{self.inner.backend}+shm"
        self.batched = False
        self.max_message_bytes = None  # shared memory gains nothing from cutting messages
        env = os.environ.get("MYCOLLECTIVES_SHM_EAGER_BYTES", str(DEFAULT_EAGER_BYTES))
        self.eager_bytes = max(1, int(eager_bytes if eager_bytes is not None else env))
        self.nonce = random.SystemRandom().getrandbits(62)
        self.host = host_id()
        self.paths: set[str] = set()
        self._out: dict[int, _Outbox] = {}
        self._in: dict[int, _Inbox] = {}
        self._finalizer = weakref.finalize(self, _unlink_all, self.paths)

    def close(self) -> None:
        """Unlink every file this end created and has not unlinked yet (done
        anyway when the transport is freed or the process exits normally)."""
        self._finalizer()

    @staticmethod
    def stem(nonce: int, src: int, dst: int) -> str:
        return os.path.join(SHM_DIR, f"mycollectives-{nonce:x}-{src}-{dst}")

    def group_rank(self, rank: int) -> int:
        return self.inner.group_rank(rank)

    def _shared(self, tensor: torch.Tensor, tag: int) -> bool:
        """Whether a message goes through shared memory: decided from what
        both ends know alike (its size and tag)."""
        return tag == 0 and tensor.numel() * tensor.element_size() >= self.eager_bytes

    def isend(self, tensor: torch.Tensor, dst: int, tag: int = 0, label: Label | None = None):
        if not self._shared(tensor, tag):
            return self.inner.isend(tensor, dst, tag, label)
        out = self._out.get(dst)
        if out is None:
            out = self._out[dst] = _Outbox(self, dst)
        nbytes = tensor.numel() * tensor.element_size()
        region, offset, seq = out.place(nbytes)
        region.data[offset : offset + nbytes].view(tensor.dtype).view(tensor.shape).copy_(tensor)
        oldest = min(r.gen for r in out.regions)  # the receiver may forget the mappings of older ones
        token = torch.tensor(
            [seq, region.gen, offset, nbytes, self.nonce, self.host, oldest], dtype=torch.int64
        )
        work = self.inner.isend(token, dst, 0, label)
        work.token = token  # alive until the send completes
        return work

    def irecv(self, tensor: torch.Tensor, src: int, tag: int = 0, label: Label | None = None):
        if not self._shared(tensor, tag):
            return self.inner.irecv(tensor, src, tag, label)
        token = torch.empty(TOKEN, dtype=torch.int64)
        return _ShmRecv(self, tensor, src, token, self.inner.irecv(token, src, 0, label))

    def exchange(self, sends: list[Message], recvs: list[Message], label: Label):
        recv_works = [self.irecv(m.tensor, m.peer, 0, label) for m in recvs]
        send_works = [self.isend(m.tensor, m.peer, 0, label) for m in sends]
        return send_works, recv_works

    def locate(
        self, src: int, token: torch.Tensor, like: torch.Tensor
    ) -> tuple[torch.Tensor, _Inbox, int, int]:
        """Where the message a token announces lies: a view of shared memory
        shaped like ``like``, and what :meth:`_Inbox.consumed` needs."""
        seq, gen, offset, nbytes, nonce, host, oldest = token.tolist()
        if host != self.host:
            raise TransportPeerError(
                f"rank {src} is on another host: ShmTransport needs every rank of the group on one host"
            )
        want = like.numel() * like.element_size()
        if nbytes != want:
            raise TransportPeerError(f"rank {src} sent {nbytes} bytes where {want} were expected")
        inbox = self._in.get(src)
        if inbox is None or inbox.nonce != nonce:
            inbox = self._in[src] = _Inbox(nonce)
        region = inbox.maps.get(gen)
        if region is None:
            path = f"{self.stem(nonce, src, self.rank)}-{gen}"
            try:
                region = _map(path)
            except OSError as e:
                raise TransportPeerError(f"cannot map rank {src}'s shared memory {path}: {e}") from e
            _unlink(path)  # both ends map it now: a crash from here on leaves nothing in /dev/shm
            inbox.maps[gen] = region
        for old in [g for g in inbox.maps if g < oldest]:  # regions the sender has dropped
            del inbox.maps[old]
        return region[offset : offset + nbytes].view(like.dtype).view(like.shape), inbox, seq


class _ShmRecv:
    """A receive through shared memory: its token first, then the bytes.

    ``wait()`` copies them into the receive tensor. ``view()`` instead
    returns them where they lie, for a caller that only reads them once
    (the executor reduces straight from there, saving a copy); it must call
    ``release()`` when done, which lets the sender reuse the space.
    """

    def __init__(self, transport: ShmTransport, tensor, src: int, token, work):
        self.transport, self.tensor, self.src, self.token, self.work = transport, tensor, src, token, work
        self.done = False
        self._held = None

    def is_completed(self) -> bool:
        return self.done

    def view(self, timeout: float | None = None) -> torch.Tensor:
        if self._held is None:
            self.work.wait(timeout)
            self._held = self.transport.locate(self.src, self.token, self.tensor)
        return self._held[0]

    def release(self) -> None:
        if self._held is not None and not self.done:
            _, inbox, seq = self._held
            inbox.consumed(seq, self.transport, self.src)
            self.done = True

    def wait(self, timeout: float | None = None) -> bool:
        if not self.done:
            self.tensor.copy_(self.view(timeout))
            self.release()
        return True
