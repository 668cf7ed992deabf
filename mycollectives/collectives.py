"""What each collective *is*: one record per collective (chapter 2).

Everything about a collective that does not depend on how it is computed
lives in its record, the way nccl-tests keeps one ``testColl`` per
collective and MSCCLang one class with its pre- and postcondition:

* its shape: rooted or not, reducing or not, whether ``count`` is the whole
  vector or one rank's block, torch.distributed's names for it;
* the buffers its schedules work in, where each rank's input is put before
  a schedule runs and where its output is read after (:meth:`Collective.input_at`,
  :meth:`Collective.output_at`): the contract between the API, which fills
  and reads them, and the algorithms, which compute in them;
* the NumPy oracle of the result (:meth:`Collective.oracle`), from which
  the tests' references, the bench's ``#wrong`` column, the exercises'
  expected values, the verifier's expected state and chapter 2's
  before/after pictures are all derived;
* nccl-tests' ``size`` of a call (:meth:`Collective.spec`) and its bus
  bandwidth factor, which is the traffic lower bound per byte of ``size``
  (:meth:`Collective.bound`).

>>> c = COLLECTIVE["reduce_scatter"]
>>> c.reducing, c.rooted, c.blocked, c.bound(4)
(True, False, True, 0.75)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from .schedule import IN, OUT, WORK

Piece = tuple[int, int, int]  # (buffer, offset, count) in a schedule's buffers
Fold = Callable[[np.ndarray], np.ndarray]  # a stack of rows (ranks, n) -> their reduction (n,)


@dataclass(frozen=True)
class Spec:
    """The shape of one call, which a schedule is built for.

    ``count`` is the number of elements of one rank's block: the whole vector
    for broadcast, reduce and all-reduce; one rank's share for all-gather,
    reduce-scatter, scatter and gather (the record's ``blocked``). All-to-all
    uses ``splits`` instead: ``splits[s][d]`` elements go from rank ``s`` to
    rank ``d``. ``segment`` (elements per pipeline segment) and
    ``local_size`` (ranks per node) are set only for algorithms that read
    them (their registry entry's ``uses``).
    """

    collective: str
    world_size: int
    count: int = 0
    root: int = 0
    segment: int | None = None
    local_size: int | None = None
    splits: tuple[tuple[int, ...], ...] | None = None

    @property
    def record(self) -> Collective:
        return COLLECTIVE[self.collective]

    @property
    def from_root(self) -> np.ndarray:
        """The real rank of each virtual rank, counting from the root.

        Rooted algorithms are written with the root as rank 0, then relabelled."""
        return (self.root + np.arange(self.world_size)) % self.world_size

    @property
    def matrix(self) -> np.ndarray:
        """All-to-all's ``splits`` as a ``(p, p)`` array."""
        p = self.world_size
        return np.asarray(self.splits, dtype=np.int64).reshape(p, p)


class Collective:
    """The facts of one collective; subclasses fill them in, one per collective."""

    name = ""
    aliases: tuple[str, ...] = ()  # torch.distributed names that run the same schedules
    rooted = False  # one rank (src or dst) is special
    reducing = False  # combines values with a ReduceOp
    blocked = False  # Spec.count is one rank's block; nccl-tests' size is p blocks
    in_place = False  # torch's call takes one tensor, input and output at once

    def buffers(self, spec: Spec) -> dict[int, np.ndarray]:
        """Elements of each buffer on each rank (``TMP`` is the algorithm's own)."""
        return {WORK: np.full(spec.world_size, self._work(spec), dtype=np.int64)}

    def _work(self, spec: Spec) -> int:
        return spec.world_size * spec.count if self.blocked else spec.count

    def has_input(self, spec: Spec, rank: int) -> bool:
        return True

    def has_output(self, spec: Spec, rank: int) -> bool:
        return True

    def input_at(self, spec: Spec, rank: int) -> list[Piece]:
        """Where the API puts ``rank``'s input, in the input's order."""
        return [(WORK, 0, spec.count)]

    def output_at(self, spec: Spec, rank: int) -> list[Piece]:
        """Where the API reads ``rank``'s output, in the output's order."""
        return [(WORK, 0, self._work(spec))]

    def oracle(self, spec: Spec, inputs: Sequence[np.ndarray | None], reduce: Fold) -> list:
        """Each rank's output (``None`` where it has none) from every rank's
        input (``None`` where it has none); ``reduce`` folds a stack of rows."""
        raise NotImplementedError

    def bound(self, p: int) -> float:
        """Bytes the busiest rank must send or receive, per byte of nccl-tests'
        ``size``: the bandwidth lower bound, and nccl-tests' busbw factor."""
        return (p - 1) / p

    def spec(self, p: int, size: int, itemsize: int = 4, **options) -> Spec:
        """The call of nccl-tests' ``size`` bytes: the whole vector, or all ``p``
        blocks of a blocked collective (rounded down to a multiple of ``p``)."""
        elems = max(int(size) // itemsize, 0)
        return Spec(self.name, p, count=elems // p if self.blocked else elems, **options)

    def size(self, spec: Spec, itemsize: int = 4) -> int:
        """nccl-tests' ``size`` of a call, in bytes (the inverse of :meth:`spec`)."""
        return self._work(spec) * itemsize

    def call(self, lib, inp, out, op=None, root: int = 0, group=None, rank: int = 0, **kw):
        """Run this collective through ``lib``'s torch.distributed-style call
        (``torch.distributed`` or ``mycollectives``) on flat tensors."""
        raise NotImplementedError


class Broadcast(Collective):
    name, rooted, in_place = "broadcast", True, True

    def has_input(self, spec, rank):
        return rank == spec.root

    def oracle(self, spec, inputs, reduce):
        return [inputs[spec.root]] * spec.world_size

    def bound(self, p):
        return 1.0

    def call(self, lib, inp, out, op=None, root=0, group=None, rank=0, **kw):
        return lib.broadcast(out, root, group, **kw)


class Reduce(Collective):
    name, rooted, reducing, in_place = "reduce", True, True, True

    def has_output(self, spec, rank):
        return rank == spec.root

    def oracle(self, spec, inputs, reduce):
        total = reduce(np.stack(inputs))
        return [total if r == spec.root else None for r in range(spec.world_size)]

    def bound(self, p):
        return 1.0

    def call(self, lib, inp, out, op=None, root=0, group=None, rank=0, **kw):
        return lib.reduce(out, root, op, group, **kw)


class AllReduce(Collective):
    name, reducing, in_place = "all_reduce", True, True

    def oracle(self, spec, inputs, reduce):
        return [reduce(np.stack(inputs))] * spec.world_size

    def bound(self, p):
        return 2 * (p - 1) / p

    def call(self, lib, inp, out, op=None, root=0, group=None, rank=0, **kw):
        return lib.all_reduce(out, op, group, **kw)


class AllGather(Collective):
    name, aliases, blocked = "all_gather", ("all_gather_into_tensor",), True

    def input_at(self, spec, rank):
        return [(WORK, rank * spec.count, spec.count)]

    def oracle(self, spec, inputs, reduce):
        return [np.concatenate(inputs)] * spec.world_size

    def call(self, lib, inp, out, op=None, root=0, group=None, rank=0, **kw):
        return lib.all_gather_into_tensor(out, inp, group, **kw)


class ReduceScatter(Collective):
    name, aliases, reducing, blocked = "reduce_scatter", ("reduce_scatter_tensor",), True, True

    def input_at(self, spec, rank):
        return [(WORK, 0, spec.world_size * spec.count)]

    def output_at(self, spec, rank):
        return [(WORK, rank * spec.count, spec.count)]

    def oracle(self, spec, inputs, reduce):
        total, n = reduce(np.stack(inputs)), spec.count
        return [total[r * n : (r + 1) * n] for r in range(spec.world_size)]

    def call(self, lib, inp, out, op=None, root=0, group=None, rank=0, **kw):
        return lib.reduce_scatter_tensor(out, inp, op, group, **kw)


def _slot(spec: Spec, rank: int) -> Piece:
    """Rank ``rank``'s block in a rooted, blocked collective's buffer: slot
    ``(rank - root) % p``, so that trees from the root cut it into runs."""
    return (WORK, (rank - spec.root) % spec.world_size * spec.count, spec.count)


class Scatter(Collective):
    name, rooted, blocked = "scatter", True, True

    def has_input(self, spec, rank):
        return rank == spec.root

    def input_at(self, spec, rank):
        return [_slot(spec, j) for j in range(spec.world_size)]

    def output_at(self, spec, rank):
        return [_slot(spec, rank)]

    def oracle(self, spec, inputs, reduce):
        n = spec.count
        return [inputs[spec.root][r * n : (r + 1) * n] for r in range(spec.world_size)]

    def call(self, lib, inp, out, op=None, root=0, group=None, rank=0, **kw):
        chunks = list(inp.view(-1, out.numel()).unbind()) if out.numel() else [inp] * _world(lib, group)
        return lib.scatter(out, chunks if rank == root else None, root, group, **kw)


class Gather(Collective):
    name, rooted, blocked = "gather", True, True

    def has_output(self, spec, rank):
        return rank == spec.root

    def input_at(self, spec, rank):
        return [_slot(spec, rank)]

    def output_at(self, spec, rank):
        return [_slot(spec, j) for j in range(spec.world_size)]

    def oracle(self, spec, inputs, reduce):
        return [np.concatenate(inputs) if r == spec.root else None for r in range(spec.world_size)]

    def call(self, lib, inp, out, op=None, root=0, group=None, rank=0, **kw):
        chunks = list(out.view(-1, inp.numel()).unbind()) if inp.numel() else [out] * _world(lib, group)
        return lib.gather(inp, chunks if rank == root else None, root, group, **kw)


def _world(lib, group) -> int:
    return lib.get_world_size(group)


class AllToAll(Collective):
    """Rank ``s`` sends ``splits[s][d]`` elements to rank ``d``; ``size`` is
    one rank's whole send buffer, split evenly."""

    name, aliases = "all_to_all", ("all_to_all_single",)

    def buffers(self, spec):
        m = spec.matrix
        return {IN: m.sum(axis=1), OUT: m.sum(axis=0)}

    def input_at(self, spec, rank):
        return [(IN, 0, int(spec.matrix[rank].sum()))]

    def output_at(self, spec, rank):
        return [(OUT, 0, int(spec.matrix[:, rank].sum()))]

    def oracle(self, spec, inputs, reduce):
        m = spec.matrix
        start = np.cumsum(m, axis=1) - m  # start[s, d]: where s's block for d begins
        p = spec.world_size
        return [
            np.concatenate([inputs[s][start[s, d] : start[s, d] + m[s, d]] for s in range(p)])
            for d in range(p)
        ]

    def spec(self, p, size, itemsize=4, **options):
        m = max(int(size) // itemsize, 0) // p
        return Spec(self.name, p, splits=((m,) * p,) * p, **options)

    def size(self, spec, itemsize=4):
        return int(spec.matrix.sum(axis=1).max()) * itemsize if spec.world_size else 0

    def call(self, lib, inp, out, op=None, root=0, group=None, rank=0, **kw):
        return lib.all_to_all_single(out, inp, group=group, **kw)


class Barrier(Collective):
    """No data: a schedule passes a one-element token, and what counts is
    that every rank has heard from every rank (the verifier checks causality)."""

    name = "barrier"

    def has_input(self, spec, rank):
        return False

    def has_output(self, spec, rank):
        return False

    def buffers(self, spec):
        return {WORK: np.ones(spec.world_size, dtype=np.int64)}

    def oracle(self, spec, inputs, reduce):
        return [None] * spec.world_size

    def bound(self, p):
        return 0.0

    def spec(self, p, size=0, itemsize=4, **options):
        return Spec(self.name, p, count=1, **options)

    def size(self, spec, itemsize=4):
        return 0

    def call(self, lib, inp, out, op=None, root=0, group=None, rank=0, **kw):
        return lib.barrier(group, **kw)


RECORDS = (
    Broadcast(),
    Reduce(),
    AllReduce(),
    AllGather(),
    ReduceScatter(),
    Scatter(),
    Gather(),
    AllToAll(),
    Barrier(),
)
COLLECTIVE: dict[str, Collective] = {c.name: c for c in RECORDS}
COLLECTIVES = tuple(COLLECTIVE)
ALIASES = {alias: c.name for c in RECORDS for alias in c.aliases}


def canonical(collective: str) -> str:
    """The record's name for ``collective`` or one of torch.distributed's aliases."""
    name = ALIASES.get(collective, collective)
    if name not in COLLECTIVE:
        raise ValueError(f"unknown collective {collective!r}; expected one of {COLLECTIVES + tuple(ALIASES)}")
    return name


def record(collective: str) -> Collective:
    """The record of ``collective`` (a torch.distributed alias is accepted)."""
    return COLLECTIVE[canonical(collective)]


def busbw_factor(collective: str, world_size: int) -> float:
    """nccl-tests' bus-bandwidth factor: ``busbw = algbw * factor``.

    >>> busbw_factor("all_reduce", 4), busbw_factor("all_gather", 4), busbw_factor("broadcast", 4)
    (1.5, 0.75, 1.0)
    """
    return record(collective).bound(world_size)


# --- the oracle on labels: what the verifier and the pictures start from ------


def labelled_inputs(spec: Spec) -> list[tuple[np.ndarray, np.ndarray] | None]:
    """Every rank's input as labels: element ``i`` of rank ``r``'s input is
    ``(i, 1 << r)``, its index and the set of ranks it holds (one bit each)."""
    c = spec.record
    out = []
    for r in range(spec.world_size):
        if not c.has_input(spec, r):
            out.append(None)
            continue
        n = sum(count for _, _, count in c.input_at(spec, r))
        out.append((np.arange(n, dtype=np.int64), np.full(n, np.uint64(1) << np.uint64(r))))
    return out


def labelled_outputs(spec: Spec, inputs=None) -> list[tuple[np.ndarray, np.ndarray] | None]:
    """The oracle run on labels: a reduction must add up the same element
    from disjoint sets of ranks, and its label is the union of theirs."""
    inputs = labelled_inputs(spec) if inputs is None else inputs
    c = spec.record
    ids = c.oracle(spec, [x and x[0] for x in inputs], lambda s: s[0])
    masks = c.oracle(spec, [x and x[1] for x in inputs], lambda s: np.bitwise_or.reduce(s, axis=0))
    return [None if i is None else (i, m) for i, m in zip(ids, masks)]


def numpy_reduce(op: str) -> Fold:
    """The stack-folding function of a ReduceOp name (``"SUM"``, ``"AVG"``, ``"BXOR"``, ...)."""
    folds = {
        "SUM": np.sum,
        "AVG": np.mean,
        "PRODUCT": np.prod,
        "PROD": np.prod,
        "MIN": np.min,
        "MAX": np.max,
        "BAND": np.bitwise_and.reduce,
        "BOR": np.bitwise_or.reduce,
        "BXOR": np.bitwise_xor.reduce,
    }
    fold = folds[op.upper()]
    return lambda stack: fold(stack, axis=0)
