"""Setting up the shared-memory transport, and leaving nothing behind.

Construction is collective: the ranks agree on a key that names every file
of this transport in ``/dev/shm``, check that they share a host, and learn
each other's process ids. :func:`everyone` does that exchange with the
process group's own point-to-point calls under a timeout (never the public
``torch.distributed`` collectives, which a program may have replaced with
this package's), so a rank that is late or missing gives an error naming it.

Every file a rank creates is named ``mycollectives-<key>-<rank>-...``, so
whatever a dead rank left behind can be found and removed by the others.
Files leave ``/dev/shm``

* when the receiver maps them (both ends hold the memory from then on);
* when their owner closes the transport, exits normally, or is ended by
  SIGTERM (what torchrun sends; :func:`on_sigterm` unlinks them first, where
  the program has not installed a SIGTERM handler of its own);
* when a peer notices that their owner has died (:func:`alive` on its process
  id) and unlinks the dead rank's files;
* when Python's resource tracker, a separate process, sees its owner end
  without cleaning up (SIGKILL, ``os._exit``): the files are registered with
  it;
* at the latest, when the next shared-memory transport on the host starts:
  :func:`sweep` unlinks this user's files that no process maps or holds
  open (a whole job killed by SIGKILL, its tracker too).
"""

from __future__ import annotations

import contextlib
import glob
import os
import signal
import sys
import threading
import time
import weakref
from multiprocessing import resource_tracker

import torch

from .base import TransportPeerError, TransportTimeout
from .message import COLLECTIVE_TAG

SETUP_TAG = COLLECTIVE_TAG + 1
SHM_DIR = "/dev/shm"


def everyone(inner, mine: torch.Tensor, timeout: float, what: str) -> torch.Tensor:
    """Every rank's ``mine`` (a 1-D int64 tensor of one size on every rank), as
    rows in rank order, sent and received with ``inner``'s point-to-point
    calls; a rank that does not answer within ``timeout``, or whose connection
    is gone, is named. A signal (SIGTERM, Ctrl-C) takes effect at once, not
    when the wait ends (see :func:`_meanwhile`)."""
    p, me = inner.world_size, inner.rank
    rows = torch.zeros(p, mine.numel(), dtype=torch.int64)
    rows[me] = mine
    peers = [q for q in range(p) if q != me]
    _meanwhile(lambda: _exchange(inner, mine, rows, timeout, what), f"rank {me}: {what}, with ranks {peers}")
    return rows


def _exchange(inner, mine: torch.Tensor, rows: torch.Tensor, timeout: float, what: str) -> None:
    """Post every receive and send of :func:`everyone`, then wait for each; ``q``: the peer at hand."""
    peers, works, q = [q for q in range(inner.world_size) if q != inner.rank], [], None
    try:
        for q in peers:
            works.append((q, inner.irecv(rows[q], q, SETUP_TAG)))
        for q in peers:
            works.append((q, inner.isend(mine, q, SETUP_TAG)))
        for q, work in works:  # noqa: B007 - q names the peer in the error below
            work.wait(timeout)
    except TransportTimeout as e:
        raise TransportTimeout(
            f"shared-memory set-up ({what}): rank {q} did not answer within {timeout:g} s "
            "(every rank of the group must make its first call on it)",
            peer=q,
        ) from e
    except TransportPeerError as e:
        who = e.peer if e.peer is not None else q
        raise TransportPeerError(
            f"shared-memory set-up ({what}): rank {who} has failed or ended ({e})", peer=who
        ) from e


waiting: list[str] = []  # the set-up exchanges in progress (what SIGTERM's clean-up says it interrupted)


def _meanwhile(exchange, doing: str) -> None:
    """Run ``exchange()``; on the main thread, on a helper thread while the main
    thread sleeps on an event. A wait inside gloo returns to Python only when
    it ends (up to the timeout), and Python runs a signal's handler only then;
    an event's wait is interrupted by the signal, so SIGTERM's clean-up
    (:func:`on_sigterm`) and Ctrl-C take effect at once. A helper left waiting
    ends with its timeout."""
    waiting.append(doing)
    try:
        if threading.current_thread() is not threading.main_thread():
            exchange()
            return
        done, failed = threading.Event(), []

        def helper() -> None:
            try:
                exchange()
            except BaseException as e:  # noqa: BLE001 - raised again on the caller's thread
                failed.append(e)
            finally:
                done.set()

        threading.Thread(target=helper, name="mycollectives-set-up-wait", daemon=True).start()
        while not done.wait(1.0):
            pass
        if failed:
            raise failed[0]
    finally:
        waiting.remove(doing)


def prefix(key: int, rank: int) -> str:
    """The start of the name of every file ``rank`` creates for transport ``key``."""
    return os.path.join(SHM_DIR, f"mycollectives-{key:x}-{rank}-")


def track(path: str) -> None:
    """Have Python's resource tracker unlink ``path`` if this process ends without doing so."""
    with contextlib.suppress(Exception):
        resource_tracker.register("/" + os.path.basename(path), "shared_memory")


def untrack(path: str) -> None:
    with contextlib.suppress(Exception):
        resource_tracker.unregister("/" + os.path.basename(path), "shared_memory")


def remove_rank(key: int, rank: int) -> None:
    """Unlink every file ``rank`` created for transport ``key`` (it has died)."""
    for path in glob.glob(prefix(key, rank) + "*"):
        with contextlib.suppress(OSError):
            os.unlink(path)


def alive(pid: int) -> bool:
    """Whether process ``pid`` (on this host) still runs: not gone, not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return True


_closers: weakref.WeakSet = weakref.WeakSet()
_installed = False
_previous = None  # the package's own SIGTERM handler this one replaced (the flight recorder's dump)


def on_sigterm(transport) -> None:
    """Close ``transport`` (unlinking its files) when SIGTERM arrives, then end
    the process as SIGTERM would; only where the program has no handler of
    its own (the package's flight recorder's is run after the clean-up) and
    this is the main thread (where Python allows a handler)."""
    global _installed, _previous
    _closers.add(transport)
    if _installed or threading.current_thread() is not threading.main_thread():
        return
    with contextlib.suppress(ValueError, OSError):
        current = signal.getsignal(signal.SIGTERM)
        ours = getattr(current, "__module__", "").startswith("mycollectives.")
        if current in (signal.SIG_DFL, None) or ours:
            _previous = current if ours else None
            signal.signal(signal.SIGTERM, _terminate)
            _installed = True


def _terminate(signum, frame) -> None:
    """Unlink every transport's files (saying which set-up exchange, if any, SIGTERM
    interrupted), run the handler this one replaced, and end as SIGTERM would."""
    if waiting:
        with contextlib.suppress(OSError, ValueError):
            print(
                f"mycollectives: SIGTERM during a set-up exchange ({waiting[-1]}): "
                "shared-memory files unlinked, the process ends",
                file=sys.stderr,
                flush=True,
            )
    for t in list(_closers):
        with contextlib.suppress(Exception):
            t.close(grace=0.0)
    if callable(_previous):
        _previous(signum, frame)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


_swept = False


def sweep(min_age: float = 10.0) -> list[str]:
    """Unlink the package's files in ``/dev/shm`` that are this user's, older than ``min_age``
    seconds, and mapped or held open by no process (their owners died without cleaning up);
    once per process. Returns the paths unlinked."""
    global _swept
    if _swept:
        return []
    _swept = True
    now, uid, old = time.time(), os.getuid(), set()
    for path in glob.glob(os.path.join(SHM_DIR, "mycollectives-*")):
        with contextlib.suppress(OSError):
            st = os.stat(path)
            if st.st_uid == uid and now - st.st_mtime > min_age:
                old.add(path)
    gone = sorted(old - _in_use(old)) if old else []
    for path in gone:
        with contextlib.suppress(OSError):
            os.unlink(path)
    return gone


def _in_use(paths: set[str]) -> set[str]:
    """Those of ``paths`` that a process of this host maps or holds open (as far as /proc shows;
    another user's processes cannot map this user's files, which are 0600)."""
    used: set[str] = set()
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        with contextlib.suppress(OSError):
            with open(f"/proc/{pid}/maps") as f:
                used.update(
                    line.split(None, 5)[-1].removesuffix(" (deleted)").strip()
                    for line in f
                    if SHM_DIR in line
                )
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    used.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
    return used & paths
