"""One ``torch.distributed`` world per thread: what :func:`thread_world` installs.

``torch.distributed`` keeps its process groups in one module-level object,
``distributed_c10d._world`` (the default group, the names, the rank maps).
Ranks that are threads of one process need one such world each, as torch's
own threaded process group does (``torch.testing._internal.distributed.
multi_threaded_pg``): :func:`install` replaces ``_world`` by a
:class:`PerThreadWorld` whose state lives in a ``threading.local``. A thread
that has not entered a thread world sees the process's own world, so a
``torchrun`` job's main thread is unaffected.

C++ keeps a registry of groups by name (what functional collectives look
up); it is switched to one registry per thread while a thread world is open
(``_set_thread_isolation_mode``), since every thread names its default
group ``"0"``. Meanwhile ``dist.init_process_group`` called in a thread
whose world is already set up does nothing, and ``dist.new_group`` there
makes a group of the thread world whatever backend it names (``gloo`` or
``nccl`` would look for peers the threads do not have), so a training
script written for ``torchrun`` runs unchanged.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d


@dataclass
class WorldState:
    """What ``distributed_c10d._World`` holds, for one thread's world."""

    default_pg: dist.ProcessGroup | None = None
    pg_map: dict = field(default_factory=dict)
    pg_names: dict = field(default_factory=dict)
    pg_group_ranks: dict = field(default_factory=dict)
    pg_backend_config: dict = field(default_factory=dict)
    group_count: int = 0
    tags_to_pg: dict = field(default_factory=dict)
    pg_to_tag: dict = field(default_factory=dict)
    pg_coalesce_state: dict = field(default_factory=dict)
    comms: list = field(default_factory=list)


_FIELDS = tuple(WorldState.__dataclass_fields__)


class PerThreadWorld(c10d._World):
    """``distributed_c10d._World`` whose state is this thread's own inside a thread world,
    and the process's world (``outer``) elsewhere."""

    def __init__(self, outer: c10d._World):
        super().__init__()
        self.outer = outer
        self.local = threading.local()

    def state(self):
        return getattr(self.local, "state", None) or self.outer


def _delegate(name: str) -> property:
    def get(self):
        return getattr(self.state(), name)

    def set_(self, value):
        setattr(self.state(), name, value)

    return property(get, set_)


for _name in _FIELDS:
    setattr(PerThreadWorld, _name, _delegate(_name))

_lock = threading.Lock()
_open = 0  # thread worlds open now, in all threads
_armed = 0  # rank threads that may open a thread world on demand (``ondemand.py``)
_here = threading.local()  # .opener: this thread's on-demand ``init_process_group``, if armed
_autograd_mt: object | None = None
_torch_init, _torch_new_group = c10d.init_process_group, c10d.new_group
_torch_get_backend = dist.get_backend


def _in_thread_world() -> bool:
    world = c10d._world
    return isinstance(world, PerThreadWorld) and getattr(world.local, "state", None) is not None


def _init_process_group(*args, **kwargs) -> None:
    """torch's ``init_process_group``, except in a thread whose world is set up: there, nothing."""
    opener = getattr(_here, "opener", None)
    if _in_thread_world() and c10d._world.default_pg is not None:
        if opener is not None and opener.opened():  # the script's second call: torch's refusal
            raise ValueError("trying to initialize the default process group twice!")
        return
    if opener is not None:  # a rank of a virtual run: join the run's world
        return opener(*args, **kwargs)
    _torch_init(*args, **kwargs)


def _new_group(ranks=None, timeout=None, backend=None, *args, **kwargs):
    """torch's ``new_group``; in a thread world, on the world's backend whatever ``backend`` says."""
    if _in_thread_world():
        backend = None
        kwargs.pop("pg_options", None)
    return _torch_new_group(ranks, timeout, backend, *args, **kwargs)


def asked(backend) -> None:
    """The backend this thread's script passed to ``init_process_group`` (what ``dist.get_backend``
    answers for the groups of its thread world, as torch would: ``"undefined"`` when none)."""
    _here.backend = "undefined" if backend is None else str(backend)


def forget_asked() -> None:
    """This thread's script no longer has a backend of its own (its virtual rank ended)."""
    _here.backend = None


def _get_backend(group=None):
    """torch's ``dist.get_backend``; for a group of a virtual rank's world, the backend its script asked
    for (``"nccl"``, ``"gloo"``, ...), not the package's, as the script would see under torchrun."""
    name = _torch_get_backend(group)
    backend = getattr(_here, "backend", None)
    return dist.Backend(backend) if backend is not None and _in_thread_world() else name


def _patch(on: bool) -> None:
    init, new = (_init_process_group, _new_group) if on else (_torch_init, _torch_new_group)
    dist.init_process_group = c10d.init_process_group = init
    dist.new_group = c10d.new_group = new
    dist.get_backend = _get_backend if on else _torch_get_backend  # torch's own code keeps c10d's


def install() -> PerThreadWorld:
    """Put a :class:`PerThreadWorld` in place of torch's world (once per process)."""
    world = c10d._world
    if not isinstance(world, PerThreadWorld):
        world = c10d._world = PerThreadWorld(world)
    return world


def enter(state: WorldState) -> PerThreadWorld:
    """Give this thread its own world ``state``; C++ group names become per thread."""
    global _open, _autograd_mt
    world = install()
    if getattr(world.local, "state", None) is not None:
        raise RuntimeError(
            f"thread {threading.current_thread().name!r} is already inside a thread world: "
            "one torch.distributed world per thread"
        )
    with _lock:
        if _open == 0:
            torch._C._distributed_c10d._set_thread_isolation_mode(True)
            _patch(True)  # (again, if armed: the same functions)
            # autograd runs backward in the calling thread (the rank's), not a device thread
            _autograd_mt = torch.autograd.set_multithreading_enabled(False)
        _open += 1
    world.local.state = state
    return world


def leave() -> None:
    """This thread goes back to the process's world."""
    global _open, _autograd_mt
    world = install()
    world.local.state = None
    with _lock:
        _open -= 1
        if _open == 0:
            torch._C._distributed_c10d._set_thread_isolation_mode(False)
            _patch(_armed > 0)
            if _autograd_mt is not None:
                _autograd_mt.__exit__(None, None, None)
                _autograd_mt = None


def arm(opener) -> None:
    """This thread's ``dist.init_process_group(...)`` calls ``opener(...)`` (until :func:`disarm`)."""
    global _armed
    with _lock:
        if _armed == 0 and _open == 0:
            _patch(True)
        _armed += 1
    _here.opener = opener


def disarm() -> None:
    global _armed
    _here.opener = None
    with _lock:
        _armed -= 1
        if _armed == 0 and _open == 0:
            _patch(False)
