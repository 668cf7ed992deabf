"""A virtual CUDA device per rank: tensors on the CPU underneath, priced as the rank's GPU.

A script written for a GPU node asks ``torch.cuda`` how many GPUs there are,
picks one, moves its model there and times its steps with events. Inside a
rank of a virtual run set up with :func:`setup_gpu`, those calls answer as the
rank's GPU would:

* ``torch.cuda.is_available()`` is True, ``device_count()`` the GPUs of the
  rank's node, ``set_device`` / ``current_device`` keep the rank's own
  current device; ``torch.accelerator`` says the same (its accelerator is
  ``cuda``);
* ``.cuda()``, ``.to(0 | "cuda" | "cuda:N" | torch.device("cuda", N))``,
  factory functions with ``device=``, ``pin_memory`` and
  ``torch.load(map_location="cuda:N")`` leave the tensor on the CPU (a
  ``TorchFunctionMode``, as ``torch.utils._device`` sets a default device):
  its ops are charged to the rank's GPU by :mod:`.compute`, so ``x.device``
  reads ``cpu``;
* ``torch.cuda.Event(enable_timing=True)`` records the rank's virtual clock
  (``elapsed_time`` in virtual milliseconds); ``Stream``, ``stream(...)``,
  ``current_stream`` are the rank's streams in virtual time (work under a
  side stream is charged to the rank's clock, in order);
  ``torch.cuda.synchronize()`` waits for the whole device, so the clock
  moves to the end of every collective the rank posted, async ones no one
  waited for included; a stream's or an event's ``synchronize`` waits for
  the compute stream only, as on a GPU (``work.wait()`` orders the two);
* random numbers come from a generator of the rank's own, seeded by its
  ``torch.manual_seed`` (and ``torch.cuda.manual_seed``), as each process of
  a torchrun job has its own: every torch function that takes
  ``generator=`` gets the rank's when it is given none, and ``F.dropout``
  (``nn.Dropout``) draws its mask from it too;
* ``memory_allocated`` / ``max_memory_allocated`` read a ledger of the bytes
  of tensor storage the rank made (:class:`~mycollectives.memory.tracker.LiveTensors`).

What is not emulated (CUDA graphs, ``torch.compile``, custom CUDA kernels,
NVML) raises :class:`NotEmulated`, one line naming it. The patches of
``torch`` are installed while at least one rank holds :func:`setup_gpu` and only
answer in rank threads; everything is put back when the last rank ends.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from dataclasses import dataclass, field

import torch

from ..memory.tracker import LiveTensors
from . import maestro as _m
from . import streams as _s


class NotEmulated(RuntimeError):
    """A CUDA feature the virtual cluster does not model (the message is one line naming it)."""


@dataclass
class VirtualGPU:
    """The CUDA state of one rank thread."""

    rank: int
    count: int  # GPUs on the rank's node (what device_count says)
    name: str
    device: int = 0  # the current device (set_device)
    home: int | None = None  # the last CUDA device the script named: where its tensors read as on
    memory: LiveTensors = field(default_factory=LiveTensors)
    rng: torch.Generator = field(default_factory=torch.Generator)  # the rank's own default generator
    stream: object = None  # the current stream (torch.cuda.stream(...))


_here = threading.local()
_of_run: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # maestro -> {rank: its VirtualGPU}


def gpu() -> VirtualGPU | None:
    """This thread's virtual GPU (a rank's, or its stream's: a callback of an async collective runs
    there), or None outside a rank set up with :func:`setup_gpu`."""
    g = getattr(_here, "gpu", None)
    if g is None:
        actor = _m.current_or_none()
        if actor is not None:
            g = _of_run.get(actor.maestro, {}).get(actor.rank)
    return g


def refuse(what: str, why: str):
    """A stand-in for ``what`` that raises :class:`NotEmulated` in a rank thread."""

    def refused(*args, **kwargs):
        g = gpu()
        where = f"rank {g.rank}: " if g is not None else ""
        raise NotEmulated(
            f"{where}{what} is not emulated on the virtual cluster ({why}); run this part on a real GPU"
        )

    refused.__name__ = what.rsplit(".", 1)[-1]
    return refused


def index(device=None) -> int:
    """The device index ``device`` names (None or ``"cuda"``: the current one), checked against the node."""
    g = gpu()
    if device is None:
        return g.device
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type != "cuda":
            raise ValueError(f"rank {g.rank}: expected a cuda device, got {device}")
        device = g.device if device.index is None else device.index
    if not isinstance(device, int) or isinstance(device, bool) or not -1 <= device < g.count:
        raise ValueError(
            f"rank {g.rank}: invalid device ordinal {device!r}; this virtual node has {g.count} GPUs (0..{g.count - 1})"
        )
    return g.device if device == -1 else device


def set_device(device) -> None:
    gpu().device = index(device)


def current_device() -> int:
    return gpu().device


def synchronize(device=None) -> None:
    """The host waits for the whole GPU: its compute stream (the rank's clock already) and the streams
    of its collectives, async ones no one waited for included (:func:`.streams.drain`)."""
    actor = _m.current()
    _s.drain(actor)
    actor.maestro.sync(actor)


def _sync_compute_stream() -> None:
    """A stream's or an event's ``synchronize``: the compute stream is the rank's clock, so the host has
    caught up already; an async collective is not waited for (as on a GPU, see :mod:`.streams`)."""
    actor = _m.current()
    actor.maestro.sync(actor)


class Event:
    """``torch.cuda.Event``: ``record()`` notes the rank's virtual clock; ``elapsed_time`` in virtual ms."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):
        if interprocess:
            refuse("torch.cuda.Event(interprocess=True)", "events shared between processes")()
        self.enable_timing, self.at = enable_timing, None

    def record(self, stream=None) -> None:
        self.at = _m.current().clock

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        _sync_compute_stream()

    def wait(self, stream=None) -> None:
        pass

    def elapsed_time(self, end: Event) -> float:
        if not (self.enable_timing and end.enable_timing):
            raise RuntimeError(
                "Events must be created with enable_timing=True to time them (as torch.cuda says)"
            )
        if self.at is None or end.at is None:
            raise RuntimeError("elapsed_time: both events must be recorded first (as torch.cuda says)")
        return (end.at - self.at) * 1e3


class Stream:
    """``torch.cuda.Stream`` of a rank: work under it is charged to the rank's GPU, in order."""

    def __init__(self, device=None, priority: int = 0, **kwargs):
        self.device_index, self.priority = index(device), priority

    def wait_stream(self, stream) -> None:
        pass

    def wait_event(self, event) -> None:
        pass

    def record_event(self, event: Event | None = None) -> Event:
        event = event or Event()
        event.record(self)
        return event

    def query(self) -> bool:
        return True

    def is_capturing(self) -> bool:  # a CUDA graph's capture: never (they are not emulated)
        return False

    def synchronize(self) -> None:
        _sync_compute_stream()

    @property
    def device(self) -> torch.device:
        return torch.device("cuda", self.device_index)


def current_stream(device=None) -> Stream:
    g = gpu()
    if g.stream is None:
        g.stream = Stream()
    return g.stream


@contextlib.contextmanager
def stream(s: Stream | None):
    """``torch.cuda.stream(s)``: ``s`` is the current stream in the block."""
    g = gpu()
    before = g.stream
    if s is not None:
        g.stream = s
    try:
        yield s
    finally:
        g.stream = before


@contextlib.contextmanager
def device(d):
    """``torch.cuda.device(d)``: ``d`` is the current device in the block."""
    g = gpu()
    before = g.device
    if d is not None:
        g.device = index(d)
    try:
        yield
    finally:
        g.device = before


def memory_allocated(device=None) -> int:
    return gpu().memory.live


def max_memory_allocated(device=None) -> int:
    return gpu().memory.peak


def reset_peak_memory_stats(device=None) -> None:
    gpu().memory.reset_peak()


def manual_seed(seed) -> torch.Generator:
    return gpu().rng.manual_seed(seed)


def seed() -> int:
    return gpu().rng.seed()


def initial_seed() -> int:
    return gpu().rng.initial_seed()


def get_rng_state() -> torch.Tensor:
    return gpu().rng.get_state()


def set_rng_state(state: torch.Tensor) -> None:
    gpu().rng.set_state(state)


def get_device_name(device=None) -> str:
    return gpu().name


@contextlib.contextmanager
def attached(rank: int, count: int, name: str):
    """This thread is rank ``rank``'s virtual GPU (one of ``count`` on its node) until the block ends
    (:func:`~mycollectives.virtual.cudapatch.setup_gpu` adds torch's patches around it)."""
    g = VirtualGPU(rank, count, name)
    ranks = _of_run.setdefault(_m.current().maestro, {})
    with g.memory:
        _here.gpu = ranks[rank] = g
        try:
            yield g
        finally:
            _here.gpu = None
            del ranks[rank]
