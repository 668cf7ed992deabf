"""``dist.init_process_group`` in a rank of a virtual run joins the run's world, without opting in.

A script written for ``torchrun`` initialises ``torch.distributed`` itself:
``init_process_group("nccl")`` (or ``"gloo"``, ``"cpu:gloo,cuda:nccl"``, no
backend at all), from ``env://``, ``tcp://`` or a store. Inside a rank of
``mycollectives.virtual.run``, :func:`setup` (which the run holds in every
rank) arms that call: it opens a :func:`~mycollectives.torchpg.thread_world`
on the rank's transport instead, whatever the backend and rendezvous say
(the ranks are the run's; rank and world size, when given, are checked).
Before the call ``dist.is_initialized()`` is False, as under torchrun; after
``destroy_process_group`` a new ``init_process_group`` opens it again. The
world still open when the rank's function ends is closed.
"""

from __future__ import annotations

import contextlib
import datetime
from collections.abc import Iterator

import torch.distributed as dist

from ..transport import current_local
from . import world as _world


def _check_backend(rank: int, backend) -> None:
    if backend is None:
        return
    try:
        dist.distributed_c10d.BackendConfig(dist.Backend(backend) if ":" not in str(backend) else backend)
    except (ValueError, TypeError) as e:
        raise ValueError(
            f"init_process_group on rank {rank}: backend {backend!r} is not one torch knows ({e})"
        ) from e


class _Opener:
    """This rank's ``init_process_group`` (see the module)."""

    def __init__(self, transport):
        self.t, self.cm = transport, None

    def __call__(
        self, backend=None, init_method=None, timeout=None, world_size=-1, rank=-1, store=None, **_ignored
    ) -> None:
        from . import BACKEND, thread_world

        t = self.t
        _check_backend(t.rank, backend)
        _world.asked(backend)
        for name, given, have in (("rank", rank, t.rank), ("world_size", world_size, t.world_size)):
            if given not in (-1, None) and given != have:
                raise ValueError(
                    f"init_process_group on rank {t.rank}: {name}={given}, but this rank of the virtual run "
                    f"has {name} {have}"
                )
        seconds = timeout.total_seconds() if isinstance(timeout, datetime.timedelta) else 300.0
        if self.cm is None:
            self.cm = thread_world(t.rank, t.world_size, t, timeout=seconds)
            self.cm.__enter__()
        else:  # destroyed and initialised again: the same thread world, a new default group
            _world._torch_init(
                BACKEND,
                store=dist.HashStore(),
                rank=t.rank,
                world_size=t.world_size,
                timeout=datetime.timedelta(seconds=seconds),
            )

    def opened(self) -> bool:
        """Whether the script's own ``init_process_group`` opened the world, and it is still open."""
        return self.cm is not None and dist.is_initialized()

    def close(self) -> None:
        if self.cm is not None:
            cm, self.cm = self.cm, None
            cm.__exit__(None, None, None)


@contextlib.contextmanager
def setup(rank: int, world_size: int) -> Iterator[None]:
    """A virtual run's hook in every rank: ``init_process_group`` opens the rank's thread world."""
    t = current_local()
    if t is None:
        yield
        return
    opener = _Opener(t)
    _world.arm(opener)
    try:
        yield
    finally:
        _world.disarm()
        _world.forget_asked()
        opener.close()
