"""The memory side of the shared-memory transport (``shm.py``): files in
``/dev/shm``, who writes where, and when space may be reused.

A sender owns, per peer, a few *regions* (files it creates, named by its
random nonce) and writes messages into them one after another; the peer
publishes how many messages it has read, in order, in a small *control*
file that the sender also owns. A region all of whose messages have been
read is reused, so its pages are already mapped; a sender never waits for
its peer, it creates a new region instead. The receiver unlinks each file as
soon as it has mapped it: the memory lives while either end maps it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
import time

import torch

from .shm_setup import SHM_DIR, prefix, track, untrack

__all__ = ["SHM_DIR", "Inbox", "Outbox", "Region", "host_id", "map_file", "stem", "unlink", "unlink_all"]
MIN_REGION_BYTES = 4 << 20
MAX_REGIONS = 4  # read regions kept per peer for reuse
ALIGN = 64  # bytes: every message starts on a cache line (and any dtype's alignment)


def host_id() -> int:
    """This host, as a 62-bit number (machine and boot, so containers that
    share a host name on different machines still differ)."""
    boot = ""
    with contextlib.suppress(OSError):
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
    digest = hashlib.blake2b(f"{socket.gethostname()}/{boot}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 2


def stem(key: int, src: int, nonce: int, dst: int) -> str:
    """The start of the names of the files sender ``src`` (whose transport
    drew ``nonce``) writes for ``dst``, in the transport the ranks agreed on
    as ``key`` (so that every file of a rank is found by ``shm_setup.prefix``)."""
    return f"{prefix(key, src)}{nonce:x}-{dst}"


def map_file(path: str, nbytes: int | None = None) -> torch.Tensor:
    """A file of ``/dev/shm`` as a shared uint8 tensor: created with
    ``nbytes`` if given, else opened at its current size."""
    if nbytes is not None:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        track(path)
        try:
            os.ftruncate(fd, nbytes)
        finally:
            os.close(fd)
    else:
        nbytes = os.path.getsize(path)
    return torch.from_file(path, shared=True, size=nbytes, dtype=torch.uint8)


def unlink(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def unlink_all(paths: set, grace: float = 0.0) -> None:
    """Unlink ``paths``, first giving the peers up to ``grace`` seconds to
    map them. A receiver unlinks each file as soon as it has mapped it, so a
    file still here is one a peer has not read yet: a sender that finished
    its last send (its token is on the wire) must not pull the bytes from
    under a receiver that is a moment behind. A peer that never maps them
    (it failed, or refused the message) costs at most ``grace``."""
    deadline = time.monotonic() + grace
    while any(os.path.exists(p) for p in paths) and time.monotonic() < deadline:
        time.sleep(0.005)
    for p in list(paths):
        unlink(p)
        untrack(p)
    paths.clear()


class Region:
    """One shared file a sender writes messages into, from offset 0 up."""

    def __init__(self, path: str, gen: int, nbytes: int):
        self.path, self.gen = path, gen
        self.data = map_file(path, nbytes)
        self.head = 0  # the next free byte
        self.last = 0  # seq of the last message placed here


class Outbox:
    """A sender's side of one peer: its regions, and the peer's count of
    messages read (in the control file, which the peer writes). ``paths``
    is the owner's set of files to unlink when it closes."""

    def __init__(self, stem: str, paths: set):
        self.stem, self.paths = stem, paths
        self.seq = 0
        self.gens = 0
        self.regions: list[Region] = []
        ctl_path = f"{stem}-ctl"
        self.ctl = map_file(ctl_path, 4096).view(torch.int64)
        paths.add(ctl_path)

    def place(self, nbytes: int) -> tuple[Region, int, int]:
        """Where the next message of ``nbytes`` goes: (region, offset, seq).

        The current region while it has room; else a region the peer has
        read completely (its pages are already mapped: no page faults); else
        a new one, sized for the message (at least ``MIN_REGION_BYTES``).
        """
        consumed = int(self.ctl[0])
        self.seq += 1
        need = -(-nbytes // ALIGN) * ALIGN
        cur = self.regions[-1] if self.regions else None
        if cur is None or cur.head + need > cur.data.numel():
            cur = next((r for r in self.regions if consumed >= r.last and r.data.numel() >= need), None)
            if cur is not None:
                self.regions.remove(cur)
                cur.head = 0
            else:
                cur = Region(f"{self.stem}-{self.gens}", self.gens, max(MIN_REGION_BYTES, need))
                self.paths.add(cur.path)
                self.gens += 1
            self.regions.append(cur)
        offset, cur.head, cur.last = cur.head, cur.head + need, self.seq
        extra = len(self.regions) - MAX_REGIONS  # beyond that, the oldest read regions go
        for r in [r for r in self.regions[:-1] if consumed >= r.last][: max(0, extra)]:
            self.regions.remove(r)
            self.paths.discard(r.path)  # read, so the peer has mapped and unlinked it
            untrack(r.path)
        return cur, offset, self.seq

    def oldest(self) -> int:
        """The oldest region still in use: the peer may forget older ones."""
        return min(r.gen for r in self.regions)


class Inbox:
    """A receiver's side of one sender transport (``nonce``): the regions it
    has mapped and the count of messages read, kept in order (a later
    message read first does not count until the earlier ones are read too)."""

    def __init__(self, nonce: int, stem: str):
        self.nonce, self.stem = nonce, stem
        self.maps: dict[int, torch.Tensor] = {}
        self.ctl: torch.Tensor | None = None
        self.next = 1
        self.done: set[int] = set()

    def region(self, gen: int, oldest: int) -> torch.Tensor:
        """Region ``gen``, mapped (and unlinked) the first time; mappings of
        regions older than the sender's ``oldest`` are dropped. The control
        file is mapped with the first region, so every file this inbox needs
        is opened here (where a failure names the sender), none later."""
        if self.ctl is None:
            path = f"{self.stem}-ctl"
            self.ctl = map_file(path).view(torch.int64)
            unlink(path)
        data = self.maps.get(gen)
        if data is None:
            path = f"{self.stem}-{gen}"
            data = self.maps[gen] = map_file(path)
            unlink(path)  # both ends map it now: a crash from here on leaves nothing in /dev/shm
        for old in [g for g in self.maps if g < oldest]:
            del self.maps[old]
        return data

    def consumed(self, seq: int) -> None:
        """Message ``seq`` has been read: publish the count read in order
        (after the read itself, so the sender never reuses bytes still read)."""
        self.done.add(seq)
        while self.next in self.done:
            self.done.discard(self.next)
            self.next += 1
        assert self.ctl is not None, "consumed() before region()"
        self.ctl[0] = self.next - 1
