"""The threads of a virtual run: how many the system allows, and stopping one that holds control.

Every rank (and every rank's communication stream) of a run is a thread of
this process (``maestro.py``). A run of more ranks than the system lets the
process start is refused before any starts; a run that is abandoned (its
wall-clock timeout, Ctrl-C) stops the thread in control by raising an
exception in it (``PyThreadState_SetAsyncExc``, what a debugger's "interrupt
thread" does), which takes effect at its next Python instruction.
"""

from __future__ import annotations

import ctypes
import resource
import threading


def raise_in(thread: threading.Thread, exc: type[BaseException]) -> None:
    """Raise ``exc`` in ``thread`` at its next Python instruction (nothing if it has ended)."""
    if thread.ident is not None and thread.is_alive():
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), ctypes.py_object(exc))


def thread_limit() -> int | None:
    """How many threads this process may still start, as far as the system says (the user's process
    limit, the kernel's and the cgroup's), or None where none is known."""
    limits = []
    soft = resource.getrlimit(resource.RLIMIT_NPROC)[0]
    if soft != resource.RLIM_INFINITY:
        limits.append(soft)
    for path in ("/proc/sys/kernel/threads-max", "/sys/fs/cgroup/pids.max"):
        try:
            with open(path) as f:
                limits.append(int(f.read()))
        except (OSError, ValueError):  # absent, or "max"
            pass
    return min(limits) - threading.active_count() if limits else None


def check_threads(ranks: int) -> None:
    """Refuse a run whose ranks (one thread each) the system will not let this process start."""
    left = thread_limit()
    if left is not None and ranks > left:
        raise ValueError(
            f"virtual.run: {ranks} ranks need {ranks} threads, but the system lets this process start "
            f"at most {left} more (ulimit -u, kernel.threads-max, the cgroup's pids.max); run fewer ranks"
        )
