"""The menu: every algorithm is one builder, a function from a ``Spec`` to rounds.

An algorithm module registers its builders with :func:`register`; the rest of
the package reaches a schedule one way only, :func:`schedule_for` (or
:func:`build`, given a ``Spec``). What each collective's buffers hold
before and after is its record's (:mod:`mycollectives.collectives`); a builder
only says how the bytes move. Adding an algorithm is adding a builder (the
book's appendix "Adding an algorithm").
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
import sys
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..collectives import COLLECTIVES, Spec, canonical, record
from ..schedule import IN, OUT, TMP, WORK, Round, Schedule
from . import channels as _channels

Builder = Callable[[Spec], list[Round]]
OPTIONS = ("segment", "local_size")  # what a builder may read besides the call's shape
DEFAULT_SEGMENT_BYTES = 512 * 1024  # pipeline segment of the algorithms that use one


@dataclass(frozen=True)
class Entry:
    """One algorithm on the menu: its builder and the ``Spec`` options it reads."""

    name: str
    build: Builder
    uses: tuple[str, ...] = ()
    heap_only: bool = False  # auto considers it only for tensors in symmetric memory


_REGISTRY: dict[str, dict[str, Entry]] = {c: {} for c in COLLECTIVES}


def register(
    collective: str, name: str, uses: tuple[str, ...] = (), heap_only: bool = False
) -> Callable[[Builder], Builder]:
    """Put a builder on the menu of ``collective``; ``uses`` names the
    ``Spec`` options it reads (``"segment"``, ``"local_size"``), so that
    callers set only those. ``heap_only``: ``auto`` considers it only when the
    call's tensors lie in symmetric memory (a load/store algorithm, such as the
    one-shot all-reduce); it still runs anywhere when asked for by name.

    >>> @register("all_reduce", "toy")
    ... def toy(spec): return []
    >>> "toy" in algorithms("all_reduce"); unregister("all_reduce", "toy")
    True
    """
    unknown = set(uses) - set(OPTIONS)
    if unknown:
        raise ValueError(
            f"register({collective!r}, {name!r}): unknown options {sorted(unknown)}; known {OPTIONS}"
        )

    def deco(fn: Builder) -> Builder:
        table = _REGISTRY.setdefault(canonical(collective), {})
        if name in table or name in ("auto", "native"):
            raise ValueError(f"{collective} already has an algorithm called {name!r}")
        table[name] = Entry(name, fn, tuple(uses), heap_only)
        build.cache_clear()
        return fn

    return deco


def unregister(collective: str, name: str) -> None:
    """Take an algorithm off the menu (a test's toy, say)."""
    del _REGISTRY[canonical(collective)][name]
    build.cache_clear()


def algorithms(collective: str) -> tuple[str, ...]:
    """Names of the algorithms for a collective (``"auto"`` excluded), in menu order.

    >>> algorithms("broadcast")
    ('linear', 'binomial', 'chain', 'scatter_allgather')
    """
    return tuple(_REGISTRY.get(canonical(collective), {}))


def entry(collective: str, algorithm: str) -> Entry:
    table = _REGISTRY.get(canonical(collective), {})
    if algorithm not in table:
        raise ValueError(
            f"unknown algorithm {algorithm!r} for {collective}; expected 'auto' or one of {tuple(table)}"
        )
    return table[algorithm]


def uses(collective: str, algorithm: str) -> tuple[str, ...]:
    """The ``Spec`` options ``algorithm`` reads."""
    return entry(collective, algorithm).uses


def _extents(rounds: list[Round], p: int, buf: int) -> np.ndarray:
    """Largest end offset any transfer touches in ``buf``, per rank."""
    ext = np.zeros(p, dtype=np.int64)
    for r in rounds:
        s = r.sbuf == buf
        np.maximum.at(ext, r.src[s], r.soff[s] + r.count[s])
        d = r.dbuf == buf
        np.maximum.at(ext, r.dst[d], r.doff[d] + r.count[d])
    return ext


@functools.lru_cache(maxsize=512)
def build(spec: Spec, algorithm: str) -> Schedule:
    """The schedule of ``algorithm`` for ``spec`` (cached: schedules are immutable)."""
    if spec.channels > 1:  # k copies on k parts of the data (channels.py), each built as any call
        rounds = [r for r in _channels.cut(spec, lambda sub: build(sub, algorithm).rounds) if len(r)]
    else:
        rounds = [r for r in entry(spec.collective, algorithm).build(spec) if len(r)]
    buffers = record(spec.collective).buffers(spec)
    for buf in (WORK, IN, OUT):
        if buf in buffers:
            over = _extents(rounds, spec.world_size, buf) > buffers[buf]
            if over.any():
                raise AssertionError(f"{spec.collective}/{algorithm} writes past buffer {buf}")
    tmp = _extents(rounds, spec.world_size, TMP)
    if tmp.any():
        buffers[TMP] = tmp
    params = {k: v for k, v in vars(spec).items() if k not in ("collective", "world_size")}
    return Schedule(spec.collective, algorithm, spec.world_size, tuple(rounds), buffers, params)


def spec_for(
    collective: str,
    algorithm: str,
    world_size: int,
    nbytes: int = 0,
    itemsize: int = 4,
    *,
    count: int | None = None,
    root: int = 0,
    splits=None,
    segment_bytes: int | None = None,
    local_size: int | None = None,
    channels: int = 1,
) -> Spec:
    """The ``Spec`` of a call, with only the options ``algorithm`` reads.

    The call is nccl-tests' ``size`` of ``nbytes`` (:meth:`~mycollectives.collectives.Collective.spec`),
    or ``count`` elements (a block, for blocked collectives), or all-to-all
    ``splits``; ``segment_bytes`` defaults to ``DEFAULT_SEGMENT_BYTES`` (512 KiB);
    ``channels`` (a positive int) cuts it into that many channels (``channels.py``).
    """
    c = record(collective)
    opts = {"root": root} if c.rooted else {}
    reads = uses(c.name, algorithm)
    if "segment" in reads:
        opts["segment"] = max(1, (segment_bytes or DEFAULT_SEGMENT_BYTES) // itemsize)
    if channels != 1:
        opts["channels"] = _channels.check(channels, f"{c.name}/{algorithm}")
    if "local_size" in reads or (channels != 1 and local_size):  # channels lie on rails by node
        opts["local_size"] = local_size
    if splits is not None:
        return Spec(c.name, world_size, splits=tuple(map(tuple, splits)), **opts)
    if count is not None:
        return c.with_count(world_size, count, **opts)
    return c.spec(world_size, nbytes, itemsize, **opts)


def schedule_for(
    collective: str, algorithm: str, world_size: int, nbytes: int = 0, itemsize: int = 4, **call
):
    """The schedule of ``algorithm`` for a call (arguments as :func:`spec_for`):
    the one way from a call to a schedule, for the API, the simulator, the
    bench, the tests and the chapters.

    >>> len(schedule_for("all_reduce", "ring", 4, 1 << 20))  # 2(p-1) rounds
    6
    """
    if algorithm == "auto":
        raise ValueError("resolve 'auto' first: mycollectives.auto.choose(...)")
    return build(spec_for(collective, algorithm, world_size, nbytes, itemsize, **call), algorithm)


def discover(package: str, path) -> list[str]:
    """Import every module of ``package`` not imported yet (``_``-prefixed ones
    excepted), in name order: a new algorithm file registers itself with no
    other edit. Returns the modules it imported."""
    found = []
    for mod in sorted(pkgutil.iter_modules(path), key=lambda m: m.name):
        name = f"{package}.{mod.name}"
        if not mod.name.startswith("_") and name not in sys.modules:
            importlib.import_module(name)
            found.append(name)
    return found
