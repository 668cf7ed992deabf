"""What every collective's record has (:class:`Collective`), the call it describes
(:class:`Spec`, :class:`Call`) and the API forms that run it; the records are
in :mod:`.kinds`, the table of them in the package.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..schedule import WORK

Piece = tuple[int, int, int]  # (buffer, offset, count) in a schedule's buffers
Fold = Callable[[np.ndarray], np.ndarray]  # a stack of rows (ranks, n) -> their reduction (n,)

# The records by name: filled by the package (``__init__``) from its RECORDS and add_record.
COLLECTIVE: dict[str, Collective] = {}


@dataclass(frozen=True)
class Spec:
    """The shape of one call, which a schedule is built for.

    ``count`` is the number of elements of one rank's block: the whole vector
    for broadcast, reduce and all-reduce; one rank's share for all-gather,
    reduce-scatter, scatter and gather (the record's ``blocked``). All-to-all
    uses ``splits`` instead: ``splits[s][d]`` elements go from rank ``s`` to
    rank ``d``. ``segment`` (elements per pipeline segment) and
    ``local_size`` (ranks per node) are set only for algorithms that read
    them (their registry entry's ``uses``); ``channels`` cuts the schedule into
    that many copies (:mod:`mycollectives.algorithms.channels`), which keeps
    ``local_size`` to lay them on rails.
    """

    collective: str
    world_size: int
    count: int = 0
    root: int = 0
    segment: int | None = None
    local_size: int | None = None
    splits: tuple[tuple[int, ...], ...] | None = None
    channels: int = 1  # NCCL's channels: k copies of the algorithm, each on a k-th of the data

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
    carries_data = True  # False: a token only, and what counts is that every rank hears from every rank
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
