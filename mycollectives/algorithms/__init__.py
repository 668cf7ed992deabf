"""The menu of algorithms, each a function from a :class:`Spec` to rounds.

An algorithm module registers its builders with :func:`register`; the rest of
the package asks :func:`build` for a :class:`~mycollectives.schedule.Schedule`.
The buffer layout every collective's schedules agree on (what the API puts in
each buffer before the schedule runs, and where it finds the result) is fixed
here, in :func:`buffer_sizes`, and documented in ``verify.py``, which checks it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..schedule import IN, OUT, TMP, WORK, Round, Schedule

COLLECTIVES = (
    "broadcast",
    "reduce",
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "scatter",
    "gather",
    "all_to_all",
    "barrier",
)

# torch.distributed names that run the same schedules as a collective above
ALIASES = {
    "all_gather_into_tensor": "all_gather",
    "reduce_scatter_tensor": "reduce_scatter",
    "all_to_all_single": "all_to_all",
}

ROOTED = {"broadcast", "reduce", "scatter", "gather"}


@dataclass(frozen=True)
class Spec:
    """What a schedule is built for.

    ``count`` is the number of elements of one rank's block: the whole vector
    for broadcast, reduce and all-reduce; one rank's share for all-gather,
    reduce-scatter, scatter and gather. All-to-all uses ``splits`` instead:
    ``splits[s][d]`` elements go from rank ``s`` to rank ``d``.
    """

    collective: str
    world_size: int
    count: int = 0
    root: int = 0
    segment: int | None = None  # elements per pipeline segment
    local_size: int | None = None  # ranks per node (hierarchical)
    splits: tuple[tuple[int, ...], ...] | None = None

    @property
    def from_root(self) -> np.ndarray:
        """The real rank of each virtual rank, counting from the root.

        Rooted algorithms are written with the root as virtual rank 0 and
        then relabelled with these ranks.
        """
        return (self.root + np.arange(self.world_size)) % self.world_size


Builder = Callable[[Spec], list[Round]]
_REGISTRY: dict[str, dict[str, Builder]] = {c: {} for c in COLLECTIVES}


def register(collective: str, name: str, uses: tuple[str, ...] = ()) -> Callable[[Builder], Builder]:
    """Add a builder to the menu; ``uses`` names the :class:`Spec` options it reads
    (``"segment"``, ``"local_size"``), so the API sets only those."""

    def deco(fn: Builder) -> Builder:
        _REGISTRY[collective][name] = fn
        fn.algorithm_name = name  # type: ignore[attr-defined]
        fn.uses = uses  # type: ignore[attr-defined]
        return fn

    return deco


def canonical(collective: str) -> str:
    name = ALIASES.get(collective, collective)
    if name not in _REGISTRY:
        raise ValueError(f"unknown collective {collective!r}; expected one of {COLLECTIVES + tuple(ALIASES)}")
    return name


def algorithms(collective: str) -> tuple[str, ...]:
    """Names of the algorithms for a collective (``"auto"`` excluded).

    >>> algorithms("broadcast")
    ('linear', 'binomial', 'chain', 'scatter_allgather')
    """
    return tuple(_REGISTRY[canonical(collective)])


def builder(collective: str, algorithm: str) -> Builder:
    table = _REGISTRY[canonical(collective)]
    if algorithm not in table:
        raise ValueError(
            f"unknown algorithm {algorithm!r} for {collective}; expected 'auto' or one of {tuple(table)}"
        )
    return table[algorithm]


def buffer_sizes(spec: Spec) -> dict[int, np.ndarray]:
    """Elements of ``WORK``, ``IN`` and ``OUT`` on each rank, fixed per collective."""
    p, n, c = spec.world_size, spec.count, spec.collective
    ones = np.ones(p, dtype=np.int64)
    if c in ("broadcast", "reduce", "all_reduce"):
        return {WORK: n * ones}
    if c in ("all_gather", "reduce_scatter", "scatter", "gather"):
        return {WORK: p * n * ones}
    if c == "all_to_all":
        m = np.asarray(spec.splits, dtype=np.int64).reshape(p, p)
        return {IN: m.sum(axis=1), OUT: m.sum(axis=0)}
    if c == "barrier":
        return {WORK: ones}
    raise ValueError(c)


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
    rounds = [r for r in builder(spec.collective, algorithm)(spec) if len(r)]
    buffers = buffer_sizes(spec)
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


# importing the modules registers their algorithms, in menu order
from . import (  # noqa: E402,F401
    all_gather,
    all_reduce,
    all_to_all,
    barrier,
    broadcast,
    hierarchical,
    reduce,
    reduce_scatter,
    scatter_gather,
    trees,
)
