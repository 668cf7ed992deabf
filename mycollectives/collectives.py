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
from dataclasses import dataclass, field

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


@dataclass
class Call:
    """One rank's call of a collective on flat tensors, as a form receives it.

    ``inp`` holds the rank's input in :meth:`Collective.input_at`'s order,
    ``out`` its output in :meth:`Collective.output_at`'s (the same tensor for
    an in-place collective); ``lib`` is ``torch.distributed`` or the package.
    """

    lib: object
    spec: Spec
    inp: object
    out: object
    op: object = None
    root: int = 0  # as the library names it (a global rank under torch.distributed's subgroups)
    group: object = None
    rank: int = 0
    kw: dict = field(default_factory=dict)

    def blocks(self, x) -> list:
        """``x`` cut into the ``p`` blocks of ``spec.count`` elements (views, so writes land in ``x``)."""
        return list(x.view(self.spec.world_size, self.spec.count).unbind())

    @property
    def is_root(self) -> bool:
        return self.rank == self.spec.root


Form = Callable[[str, Call], object]  # (function name, the call) -> calls lib.<function name>


class Collective:
    """The facts of one collective; subclasses fill them in, one per collective."""

    name = ""
    rooted = False  # one rank (src or dst) is special
    reducing = False  # combines values with a ReduceOp
    blocked = False  # Spec.count is one rank's block; nccl-tests' size is p blocks
    in_place = False  # torch's call takes one tensor, input and output at once
    split = False  # per-pair sizes (Spec.splits), which the ranks learn from each other
    in_torch = True  # torch.distributed has it, under the first function's name
    # the API functions that run it (torch.distributed's names), the flat-tensor
    # form first, each with how to call it on flat tensors (:class:`Call`)
    forms: dict = {}  # function name -> Form

    @property
    def functions(self) -> tuple[str, ...]:
        return tuple(self.forms)

    @property
    def aliases(self) -> tuple[str, ...]:
        """The other names of its functions, which run the same schedules."""
        return tuple(f for f in self.forms if f != self.name)

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

    def example(self, p: int, n: int, root: int = 0, rng: np.random.Generator | None = None) -> Spec:
        """A test's call of about ``n`` elements per rank (one rank's block
        where blocked); a collective with per-pair sizes draws uneven ones from ``rng``."""
        return self.with_count(p, n, **({"root": root} if self.rooted else {}))

    def with_count(self, p: int, count: int, **options) -> Spec:
        """The call of ``count`` elements (one rank's block where blocked)."""
        return Spec(self.name, p, count=count, **options)

    def call(
        self,
        lib,
        inp,
        out,
        op=None,
        root: int = 0,
        group=None,
        rank: int = 0,
        *,
        spec=None,
        function=None,
        **kw,
    ):
        """Run this collective through ``lib``'s torch.distributed-style ``function``
        (its first form by default) on flat tensors sized as the record says
        (``spec``: the call's, else an even one read off the tensors)."""
        function = function or self.functions[0]
        if spec is None:
            spec = self._spec_of(lib, inp, out, root, group)
        return self.forms[function](function, Call(lib, spec, inp, out, op, root, group, rank, kw))

    def _spec_of(self, lib, inp, out, root, group) -> Spec:
        """An even call read off the tensors (None where a rank has none): the
        larger holds all ``p`` blocks where blocked (on the rank that has them)."""
        p = lib.get_world_size(group)
        n = max([t.numel() for t in (inp, out) if t is not None], default=0)
        return self.with_count(p, n // p if self.blocked else n, **({"root": root} if self.rooted else {}))


def _gather_tensor(fn: str, c: Call):
    return getattr(c.lib, fn)(c.out, c.inp, c.group, **c.kw)


def _scatter_tensor(fn: str, c: Call):
    return getattr(c.lib, fn)(c.out, c.inp, c.op, c.group, **c.kw)


def _a2a_sizes(c: Call) -> tuple[list[int] | None, list[int] | None]:
    """Split sizes (output's, input's) of this rank, None for an even split."""
    m = c.spec.matrix
    if (m == m.flat[0]).all():
        return None, None
    return m[:, c.rank].tolist(), m[c.rank].tolist()


def _a2a_single(fn: str, c: Call):
    outs, ins = _a2a_sizes(c)
    return c.lib.all_to_all_single(c.out, c.inp, outs, ins, c.group, **c.kw)


def _a2a_lists(fn: str, c: Call):
    m = c.spec.matrix
    outs, ins = list(c.out.split(m[:, c.rank].tolist())), list(c.inp.split(m[c.rank].tolist()))
    return c.lib.all_to_all(outs, ins, c.group, **c.kw)


class Broadcast(Collective):
    name, rooted, in_place = "broadcast", True, True
    forms = {"broadcast": lambda fn, c: c.lib.broadcast(c.out, c.root, c.group, **c.kw)}

    def has_input(self, spec, rank):
        return rank == spec.root

    def oracle(self, spec, inputs, reduce):
        return [inputs[spec.root]] * spec.world_size

    def bound(self, p):
        return 1.0


class Reduce(Collective):
    name, rooted, reducing, in_place = "reduce", True, True, True
    forms = {"reduce": lambda fn, c: c.lib.reduce(c.out, c.root, c.op, c.group, **c.kw)}

    def has_output(self, spec, rank):
        return rank == spec.root

    def oracle(self, spec, inputs, reduce):
        total = reduce(np.stack(inputs))
        return [total if r == spec.root else None for r in range(spec.world_size)]

    def bound(self, p):
        return 1.0


class AllReduce(Collective):
    name, reducing, in_place = "all_reduce", True, True
    forms = {"all_reduce": lambda fn, c: c.lib.all_reduce(c.out, c.op, c.group, **c.kw)}

    def oracle(self, spec, inputs, reduce):
        return [reduce(np.stack(inputs))] * spec.world_size

    def bound(self, p):
        return 2 * (p - 1) / p


class AllGather(Collective):
    name, blocked = "all_gather", True
    forms = {
        "all_gather_into_tensor": _gather_tensor,
        "all_gather": lambda fn, c: c.lib.all_gather(c.blocks(c.out), c.inp, c.group, **c.kw),
        "all_gather_single": _gather_tensor,  # torch's newer name for the tensor form
    }

    def input_at(self, spec, rank):
        return [(WORK, rank * spec.count, spec.count)]

    def oracle(self, spec, inputs, reduce):
        return [np.concatenate(inputs)] * spec.world_size


class ReduceScatter(Collective):
    name, reducing, blocked = "reduce_scatter", True, True
    forms = {
        "reduce_scatter_tensor": _scatter_tensor,
        "reduce_scatter": lambda fn, c: c.lib.reduce_scatter(c.out, c.blocks(c.inp), c.op, c.group, **c.kw),
        "reduce_scatter_single": _scatter_tensor,  # torch's newer name for the tensor form
    }

    def input_at(self, spec, rank):
        return [(WORK, 0, spec.world_size * spec.count)]

    def output_at(self, spec, rank):
        return [(WORK, rank * spec.count, spec.count)]

    def oracle(self, spec, inputs, reduce):
        total, n = reduce(np.stack(inputs)), spec.count
        return [total[r * n : (r + 1) * n] for r in range(spec.world_size)]


def _slot(spec: Spec, rank: int) -> Piece:
    """Rank ``rank``'s block in a rooted, blocked collective's buffer: slot
    ``(rank - root) % p``, so that trees from the root cut it into runs."""
    return (WORK, (rank - spec.root) % spec.world_size * spec.count, spec.count)


class Scatter(Collective):
    name, rooted, blocked = "scatter", True, True
    forms = {
        "scatter": lambda fn, c: c.lib.scatter(
            c.out, c.blocks(c.inp) if c.is_root else None, c.root, c.group, **c.kw
        )
    }

    def has_input(self, spec, rank):
        return rank == spec.root

    def input_at(self, spec, rank):
        return [_slot(spec, j) for j in range(spec.world_size)]

    def output_at(self, spec, rank):
        return [_slot(spec, rank)]

    def oracle(self, spec, inputs, reduce):
        n = spec.count
        return [inputs[spec.root][r * n : (r + 1) * n] for r in range(spec.world_size)]


class Gather(Collective):
    name, rooted, blocked = "gather", True, True
    forms = {
        "gather": lambda fn, c: c.lib.gather(
            c.inp, c.blocks(c.out) if c.is_root else None, c.root, c.group, **c.kw
        )
    }

    def has_output(self, spec, rank):
        return rank == spec.root

    def input_at(self, spec, rank):
        return [_slot(spec, rank)]

    def output_at(self, spec, rank):
        return [_slot(spec, j) for j in range(spec.world_size)]

    def oracle(self, spec, inputs, reduce):
        return [np.concatenate(inputs) if r == spec.root else None for r in range(spec.world_size)]


class AllToAll(Collective):
    """Rank ``s`` sends ``splits[s][d]`` elements to rank ``d``; ``size`` is
    one rank's whole send buffer, split evenly."""

    name, split = "all_to_all", True
    forms = {"all_to_all_single": _a2a_single, "all_to_all": _a2a_lists}

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
        return self.with_count(p, max(int(size) // itemsize, 0) // p, **options)

    def with_count(self, p, count, **options):
        """Every pair ``count`` elements."""
        return Spec(self.name, p, splits=((count,) * p,) * p, **options)

    def example(self, p, n, root=0, rng=None):
        """Uneven: each pair up to ``2n/p`` elements (zeros included), about ``n`` per rank."""
        high = max(2 * n // p, 1) if n else 0
        m = (rng or np.random.default_rng(0)).integers(0, high + 1, (p, p))
        return Spec(self.name, p, splits=tuple(map(tuple, m.tolist())))

    def _spec_of(self, lib, inp, out, root, group):
        p = lib.get_world_size(group)
        return self.with_count(p, inp.numel() // p)

    def size(self, spec, itemsize=4):
        return int(spec.matrix.sum(axis=1).max()) * itemsize if spec.world_size else 0


class Barrier(Collective):
    """No data: a schedule passes a one-element token, and what counts is
    that every rank has heard from every rank (the verifier checks causality)."""

    name = "barrier"
    forms = {"barrier": lambda fn, c: c.lib.barrier(c.group, **c.kw)}

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
        return self.with_count(p, 1, **options)

    def with_count(self, p, count, **options):
        """Always the one-element token."""
        return Spec(self.name, p, count=1, **options)

    def size(self, spec, itemsize=4):
        return 0


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
COLLECTIVES = tuple(COLLECTIVE)  # the records' names: every collective the package has
ALIASES = {alias: c.name for c in RECORDS for alias in c.aliases}
FUNCTIONS = tuple(f for c in RECORDS for f in c.functions)  # every API function that runs a collective


def add_record(c: Collective) -> None:
    """Add a collective's record after import (a test's toy; a new collective
    belongs in :data:`RECORDS`). Modules that copied :data:`COLLECTIVES` keep their copy."""
    global COLLECTIVES, FUNCTIONS
    if c.name in COLLECTIVE or any(f in ALIASES or f in COLLECTIVE for f in c.aliases):
        raise ValueError(f"a collective called {c.name!r} (or one of its functions {c.functions}) exists")
    COLLECTIVE[c.name] = c
    ALIASES.update({alias: c.name for alias in c.aliases})
    COLLECTIVES, FUNCTIONS = tuple(COLLECTIVE), FUNCTIONS + c.functions


def remove_record(name: str) -> None:
    """Undo :func:`add_record`."""
    global COLLECTIVES, FUNCTIONS
    c = COLLECTIVE.pop(name)
    for alias in c.aliases:
        ALIASES.pop(alias, None)
    COLLECTIVES = tuple(COLLECTIVE)
    FUNCTIONS = tuple(f for f in FUNCTIONS if f not in c.functions)


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
