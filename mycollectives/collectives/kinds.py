"""One record per collective: each a subclass of :class:`~.base.Collective` saying
where its input goes and output is read, its NumPy oracle and its traffic bound."""

from __future__ import annotations

import numpy as np

from ..schedule import IN, OUT, WORK
from .base import (
    Collective,
    Piece,
    Spec,
    _a2a_lists,
    _a2a_single,
    _gather_tensor,
    _scatter_tensor,
)


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
    carries_data = False
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
