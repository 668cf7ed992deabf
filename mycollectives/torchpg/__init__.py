"""``torch.distributed`` whose ranks are threads: the package's collectives behind ``dist.*``.

Inside a local world (``mc.LocalWorld(p).run(fn)``) or a virtual run, every
rank is a thread of one process with a transport of its own. In such a
thread, ``with thread_world():`` initialises ``torch.distributed`` for that
thread alone: ``dist.is_initialized()``, ``dist.get_rank()`` is the thread's
rank, and the default group is a ``ThreadProcessGroup`` whose
``all_reduce``, ``broadcast``, ``all_gather(_into_tensor)``,
``reduce_scatter(_tensor)``, ``all_to_all(_single)``, ``gather``,
``scatter``, ``reduce``, ``barrier``, ``send``/``recv`` and
``isend``/``irecv`` run the package's collectives on the thread's transport.
``dist.new_group(ranks)`` gives a group of some ranks, with a tag space of
its own (on a virtual run, the run's own subgroups). So
``DistributedDataParallel`` (buckets, comm hooks), FSDP2's ``fully_shard``,
``DeviceMesh`` groups, functional collectives, ``batch_isend_irecv`` and
training loops written for ``torchrun`` run unchanged, as ``torch``'s own
threaded test process group lets its tests do (``virtual.run(fn,
dist=True)`` opens a thread world in every rank). Inside one,
``init_process_group`` does nothing and ``new_group`` ignores the backend
it names (see ``world``). Not served: a receive from any source, several
tensors per rank; they raise ``Unsupported``. The ranks share one
process: seed per-rank randomness with a ``torch.Generator`` of its own,
not ``torch.manual_seed`` (one generator for all threads).

>>> import torch, torch.distributed as dist
>>> from mycollectives.torchpg import run_dist
>>> def fn(rank):
...     t = torch.tensor([rank + 1.0])
...     dist.all_reduce(t)
...     return dist.get_rank(), t.item()
>>> run_dist(fn, 3)
[(0, 6.0), (1, 6.0), (2, 6.0)]
"""

from __future__ import annotations

import contextlib
import datetime
import threading
from collections.abc import Callable, Iterator

import torch.distributed as dist

from ..transport import cache_transport, current_local
from . import world as _world
from .group import BACKEND, ThreadProcessGroup, Unsupported
from .subgroup import tag_base
from .work import TorchWork

__all__ = [
    "BACKEND",
    "ThreadProcessGroup",
    "TorchWork",
    "Unsupported",
    "group_transport",
    "run_dist",
    "setup",
    "thread_world",
]


class _Thread(threading.local):
    transport = None  # the transport of the thread world open in this thread


_thread = _Thread()


def _create(common, options) -> ThreadProcessGroup:
    """torch's backend hook: the process group of ranks ``common.global_ranks_in_group``."""
    parent = _thread.transport
    if parent is None:
        raise RuntimeError(
            f"backend {BACKEND!r} serves threads inside mycollectives.torchpg.thread_world(); "
            "this thread has none (use thread_world(), run_dist() or a virtual run)"
        )
    members = list(common.global_ranks_in_group)
    if not members:
        transport = parent  # the default group: the world's transport itself
    else:  # the transport's own subgroup (a virtual run's is priced on its GPUs)
        transport = parent.subgroup([parent.group_rank(m) for m in members], tag_base(str(common.group_id)))
    pg = ThreadProcessGroup(transport, str(common.group_id))
    # mc.all_reduce(t, group=pg) then uses the same transport (the package keeps one per torch group)
    cache_transport(pg, transport)
    return pg


def _register() -> None:
    if BACKEND.upper() not in dist.Backend._plugins:
        dist.Backend.register_backend(BACKEND, _create, extended_api=True, devices=["cpu", "cuda"])


def group_transport(group: dist.ProcessGroup | None = None):
    """The package transport behind ``group`` (a :class:`ThreadProcessGroup`; None: the default)."""
    pg = group if group is not None else dist.group.WORLD
    if not isinstance(pg, ThreadProcessGroup):
        raise TypeError(f"expected a group of mycollectives' thread world, got {type(pg).__name__}")
    return pg.transport


@contextlib.contextmanager
def thread_world(
    rank: int | None = None, world_size: int | None = None, transport=None, timeout: float = 300.0
) -> Iterator[dist.ProcessGroup]:
    """Initialise ``torch.distributed`` in this thread, over ``transport`` (default: the local
    world's or virtual run's transport of this thread); yields the default group.

    ``rank`` and ``world_size``, when given, must be the transport's (a check;
    ``virtual.run(..., setup=[thread_world])`` passes them). On exit the
    thread's groups are destroyed.
    """
    t = transport if transport is not None else current_local()
    if t is None:
        raise ValueError(
            "thread_world(): this thread runs no rank of a local world or virtual run, and no "
            "transport was given (call it inside mc.LocalWorld(p).run(fn) or virtual.run)"
        )
    for name, given, have in (("rank", rank, t.rank), ("world_size", world_size, t.world_size)):
        if given is not None and given != have:
            raise ValueError(f"thread_world(): {name}={given} but this thread's transport has {name} {have}")
    _register()
    _world.enter(_world.WorldState())
    _thread.transport = t
    try:
        _world._torch_init(
            BACKEND,
            store=dist.HashStore(),
            rank=t.rank,
            world_size=t.world_size,
            timeout=datetime.timedelta(seconds=timeout),
        )
        yield dist.group.WORLD
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
        _thread.transport = None
        _world.leave()


def setup(rank: int, world_size: int):
    """``virtual.run(..., setup=[setup])``'s hook (``dist=True`` adds it): :func:`thread_world`."""
    return thread_world(rank, world_size)


def run_dist(fn: Callable, world_size: int, *args, timeout: float | None = None) -> list:
    """``fn(rank, *args)`` on ``world_size`` threads, each inside its :func:`thread_world`
    (on a fresh ``mc.LocalWorld``); returns the results in rank order."""
    from ..transport import LocalWorld

    def body(rank: int, *a):
        with thread_world(rank, world_size):
            return fn(rank, *a)

    return LocalWorld(world_size, timeout=timeout).run(body, *args)
