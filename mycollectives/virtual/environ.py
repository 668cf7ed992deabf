"""``os.environ`` per rank thread: each rank of a launched script sees its own RANK, LOCAL_RANK, ...

Ranks of a virtual run are threads of one process, and ``os.environ`` is one
mapping per process. While :func:`per_thread` is open, ``os.environ`` (and so
``os.getenv``) is a :class:`ThreadEnviron`: a thread that has called
:meth:`ThreadEnviron.give` reads and writes a copy of its own; every other
thread sees the process's environment, unchanged. On exit the process's
mapping is put back. Child processes started by a rank (``subprocess``) get
that rank's copy when they pass ``env=os.environ``, the process's otherwise.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator, MutableMapping


class ThreadEnviron(MutableMapping):
    """The process's environment, or the calling thread's own copy of it (see the module)."""

    def __init__(self, base: MutableMapping):
        self.base = base
        self._here = threading.local()

    def give(self, overrides: dict[str, str]) -> None:
        """From now on this thread reads and writes a copy of the process's environment, with ``overrides``."""
        own = dict(self.base)
        own.update({k: str(v) for k, v in overrides.items()})
        self._here.env = own

    def take(self) -> None:
        """This thread goes back to the process's environment."""
        self._here.env = None

    def _env(self) -> MutableMapping:
        env = getattr(self._here, "env", None)
        return self.base if env is None else env

    def __getitem__(self, key: str) -> str:
        return self._env()[key]

    def __setitem__(self, key: str, value: str) -> None:
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(f"os.environ keys and values must be str, got {key!r}: {value!r}")
        self._env()[key] = value

    def __delitem__(self, key: str) -> None:
        del self._env()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._env()))

    def __len__(self) -> int:
        return len(self._env())

    def copy(self) -> dict[str, str]:
        return dict(self._env())

    def __repr__(self) -> str:
        return f"ThreadEnviron({dict(self._env())!r})"


_lock = threading.Lock()


@contextlib.contextmanager
def per_thread() -> Iterator[ThreadEnviron]:
    """``os.environ`` becomes a :class:`ThreadEnviron` until the block ends (nesting reuses the open one)."""
    with _lock:
        outer = os.environ
        env = outer if isinstance(outer, ThreadEnviron) else ThreadEnviron(outer)
        os.environ = env  # noqa: B003 - the mapping itself is swapped, and put back below
    try:
        yield env
    finally:
        with _lock:
            os.environ = outer  # noqa: B003
