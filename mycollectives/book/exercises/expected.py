"""What a checked collective should produce, and how a wrong value is told.

The half of :mod:`mycollectives.book.exercises.check` that knows the collectives'
definitions: a :class:`Case` (collective, world size, dtype, count, root),
the encoded inputs each rank gets and the result each rank must end with
(:func:`inputs`), and the comparison that turns a wrong element into a
sentence (:func:`compare`: "element 5 holds the sum over ranks {0, 1},
missing rank 2"). Running the reader's function is the other half.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ...collectives import Collective, Spec, numpy_reduce, record

FILL = -7  # outputs start as this, so "never written" is recognisable


@dataclass(frozen=True)
class Case:
    collective: str
    p: int
    dtype: torch.dtype
    count: int
    root: int | None

    def __str__(self) -> str:
        root = "" if self.root is None else f", root {self.root}"
        dtype = str(self.dtype).removeprefix("torch.")
        return f"world size {self.p}, {dtype}, count {self.count}{root}"


class Code:
    """Encoding of inputs that lets a wrong value be traced to its source."""

    def __init__(self, case: Case, length: int):
        self.p, self.length, self.reducing = case.p, max(length, 1), record(case.collective).reducing
        self.base = 10 ** math.ceil(math.log10(self.length + 1))  # copy: r * base + i
        self.radix = self.p + 1  # reduction: digit r counts rank r's contributions
        self.m = self.radix**self.p

    def value(self, rank: int, index: torch.Tensor) -> torch.Tensor:
        if self.reducing:
            return self.radix**rank + index * self.m
        return rank * self.base + index

    def exact(self, dtype: torch.dtype) -> bool:
        if not dtype.is_floating_point:
            return True
        top = self.p * (self.m + self.length * self.m) if self.reducing else self.p * self.base
        return top < 2 ** (1 - math.log2(torch.finfo(dtype).eps))  # integers that dtype holds exactly

    def describe(self, v: float) -> str:
        v = round(v)
        if v == FILL:
            return f"{FILL}, the value the output started with (never written)"
        if v < 0:
            return f"{v}, which no input holds"
        if not self.reducing:
            rank, index = divmod(v, self.base)
            return f"{v} = rank {rank}'s input element {index}" if rank < self.p else f"{v}"
        index_sum, low = divmod(v, self.m)
        counts = [(low // self.radix**r) % self.radix for r in range(self.p)]
        k = sum(counts)
        if k == 0:
            return f"{v}, which is no sum of inputs"
        ranks = ", ".join(str(r) if c == 1 else f"{r} ({c} times)" for r, c in enumerate(counts) if c)
        missing = [r for r, c in enumerate(counts) if c == 0]
        what = f"the sum over ranks {{{ranks}}}"
        if index_sum % k == 0:
            what += f" of input element {index_sum // k}"
        else:
            what += " of a mix of input elements"
        if missing:
            what += f", missing rank{'s' if len(missing) > 1 else ''} {', '.join(map(str, missing))}"
        return f"{v} = {what}"


def spec_of(case: Case) -> Spec:
    """The :class:`~mycollectives.collectives.Spec` of a case (all-to-all:
    blocks of ``count`` elements between every pair of ranks)."""
    c = record(case.collective)
    return c.with_count(case.p, case.count, **({"root": case.root or 0} if c.rooted else {}))


def inputs(case: Case, code: Code):
    """Per rank: the arguments for the reader's function, and the expected
    tensor to compare after the call (None: not checked).

    The arguments follow the record: an in-place collective takes
    ``(tensor[, root])``, the others ``(output, input[, root])``, with
    ``None`` where a rank has no input or no output (scatter's input and
    gather's output off the root). The expected values are the record's
    oracle on the encoded inputs.
    """
    c: Collective = record(case.collective)
    spec, dt = spec_of(case), case.dtype

    def numel(pieces) -> int:
        return sum(count for _, _, count in pieces)

    enc = [code.value(r, torch.arange(numel(c.input_at(spec, r)), dtype=torch.int64)) for r in range(case.p)]
    has = [c.has_input(spec, r) for r in range(case.p)]
    want = c.oracle(spec, [e.numpy() if h else None for e, h in zip(enc, has)], numpy_reduce("sum"))
    root = (case.root,) if c.rooted else ()
    out = []
    for r in range(case.p):
        given = enc[r].to(dt) if has[r] or c.in_place else None
        expected = torch.from_numpy(want[r]).to(dt) if want[r] is not None else None
        if c.in_place:
            args = (given, *root)
        else:
            output = (
                torch.full((numel(c.output_at(spec, r)),), FILL, dtype=dt) if c.has_output(spec, r) else None
            )
            args = (output, given, *root)
        out.append((args, expected))
    return out


def _where(case: Case, start: int, stop: int) -> str:
    """Which block or chunk elements ``start..stop-1`` of a result are."""
    p, n, c = case.p, case.count, record(case.collective)
    spec = spec_of(case)
    one_block_per_rank = sum(k for _, _, k in c.output_at(spec, 0)) == p * n
    if not c.in_place and one_block_per_rank and n:
        b, e = start // n, (stop - 1) // n
        return f"block {b} (from rank {b})" if b == e else f"blocks {b}-{e}"
    if c.in_place and p > 1 and n:
        bounds = [k * (n // p) + min(k, n % p) for k in range(p + 1)]  # the p-way split a ring uses
        first = max(k for k in range(p) if bounds[k] <= start)
        last = max(k for k in range(p) if bounds[k] <= stop - 1)
        return f"chunk {first} of {p}" if first == last else f"chunks {first}-{last} of {p}"
    return "the output"


def compare(
    case: Case, code: Code, rank: int, name: str, got: torch.Tensor, want: torch.Tensor
) -> str | None:
    if got.shape != want.shape:
        return f"rank {rank}: {name} has shape {tuple(got.shape)}, expected {tuple(want.shape)}"
    if want.dtype.is_floating_point and not code.exact(want.dtype):
        bad = ~torch.isclose(got.double(), want.double(), rtol=1e-5, atol=0)
    else:
        bad = got != want
    if not bool(bad.any()):
        return None
    idx = torch.nonzero(bad).flatten().tolist()
    start = stop = idx[0]
    while stop + 1 < len(bad) and bad[stop + 1]:
        stop += 1
    g, w = got[start].item(), want[start].item()
    exact = code.exact(want.dtype)
    detail = (
        f"element {start} holds {code.describe(g)}, expected {code.describe(w)}"
        if exact
        else f"element {start} holds {g:g}, expected {w:g}"
    )
    span = f"element {start} is" if start == stop else f"elements {start}..{stop} are"
    return f"rank {rank}: {name} {span} wrong ({_where(case, start, stop + 1)}; {len(idx)} wrong in all): {detail}"
