"""Check a reader's collective, written from send/recv, on local worlds.

:func:`check_collective` runs the reader's function on every rank of fresh
local worlds of several sizes, element types and element counts (counts that
do not divide by the world size included) and compares each rank's result
with the definition of the collective. Sends are strict: a blocking
``mc.send`` returns only once the receiver has taken the message, as large
messages do under NCCL and MPI, so code that only works while sends are
buffered fails here, with the deadlock spelled out.

Inputs are chosen so that a wrong value says where it came from: in a copy
collective element ``i`` of rank ``r``'s input is ``r * B + i`` (so a wrong
element "holds rank 2's element 3"); in a reduction it is
``(p + 1) ** r + i * M``, whose digits in base ``p + 1`` count how often each
rank was added in (so a wrong sum "misses rank 2"). Chapters 2 to 4 use it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from ..errors import CollectiveTimeout, DeadlockError
from ..transport import LocalWorld

FILL = -7  # outputs start as this, so "never written" is recognisable

ROOTED = {"broadcast", "reduce", "scatter", "gather"}
REDUCING = {"reduce", "all_reduce", "reduce_scatter"}
BLOCKED = {"all_gather", "reduce_scatter", "scatter", "gather", "all_to_all"}
COLLECTIVES = ("broadcast", "reduce", "all_reduce", "all_gather", "reduce_scatter")
COLLECTIVES += ("scatter", "gather", "all_to_all", "barrier")


class ExerciseFailure(AssertionError):
    """The reader's function gave a wrong result, raised, or hung; the
    message says in which case, on which rank, and what is wrong."""


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


class _Code:
    """Encoding of inputs that lets a wrong value be traced to its source."""

    def __init__(self, case: Case, length: int):
        self.p, self.length, self.reducing = case.p, max(length, 1), case.collective in REDUCING
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


def _inputs(case: Case, code: _Code):
    """Per rank: the arguments for the reader's function, and the expected
    (name, tensor) to compare after the call (None: not checked)."""
    p, n, root, dt = case.p, case.count, case.root, case.dtype
    c = case.collective

    def enc(rank: int, length: int) -> torch.Tensor:
        return code.value(rank, torch.arange(length, dtype=torch.int64)).to(dt)

    def fill(length: int) -> torch.Tensor:
        return torch.full((length,), FILL, dtype=dt)

    total = sum(code.value(r, torch.arange(p * n, dtype=torch.int64)) for r in range(p))
    out = []
    for r in range(p):
        if c == "broadcast":
            args, want = (enc(r, n), root), enc(root, n)
        elif c in ("reduce", "all_reduce"):
            args = (enc(r, n), root) if c == "reduce" else (enc(r, n),)
            want = total[:n].to(dt) if (c == "all_reduce" or r == root) else None
        elif c == "all_gather":
            args, want = (fill(p * n), enc(r, n)), torch.cat([enc(j, n) for j in range(p)])
        elif c == "reduce_scatter":
            args, want = (fill(n), enc(r, p * n)), total[r * n : (r + 1) * n].to(dt)
        elif c == "scatter":
            args = (fill(n), enc(r, p * n) if r == root else None, root)
            want = enc(root, p * n)[r * n : (r + 1) * n]
        elif c == "gather":
            args = (fill(p * n) if r == root else None, enc(r, n), root)
            want = torch.cat([enc(j, n) for j in range(p)]) if r == root else None
        elif c == "all_to_all":
            args = (fill(p * n), enc(r, p * n))
            want = torch.cat([enc(j, p * n)[r * n : (r + 1) * n] for j in range(p)])
        else:
            raise ValueError(f"collective must be one of {COLLECTIVES}, got {c!r}")
        out.append((args, want))
    return out


def _where(case: Case, start: int, stop: int) -> str:
    """Which block or chunk elements ``start..stop-1`` of a result are."""
    p, n = case.p, case.count
    if case.collective in ("all_gather", "gather", "all_to_all") and n:
        b, e = start // n, (stop - 1) // n
        return f"block {b} (from rank {b})" if b == e else f"blocks {b}-{e}"
    if case.collective in ("broadcast", "reduce", "all_reduce") and p > 1 and n:
        bounds = [k * (n // p) + min(k, n % p) for k in range(p + 1)]  # the p-way split a ring uses
        first = max(k for k in range(p) if bounds[k] <= start)
        last = max(k for k in range(p) if bounds[k] <= stop - 1)
        return f"chunk {first} of {p}" if first == last else f"chunks {first}-{last} of {p}"
    return "the output"


def _compare(
    case: Case, code: _Code, rank: int, name: str, got: torch.Tensor, want: torch.Tensor
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


def _run_case(fn: Callable, case: Case, timeout: float, allow_collectives: bool, sends_per_rank) -> None:
    p = case.p
    world = LocalWorld(p, timeout=timeout, eager_bytes=0)
    if case.collective == "barrier":
        return _run_barrier(fn, case, world, timeout)
    code = _Code(case, p * case.count)
    per_rank = _inputs(case, code)
    before = [[a.clone() if isinstance(a, torch.Tensor) else a for a in args] for args, _ in per_rank]
    results = _launch(fn, case, world, [args for args, _ in per_rank], timeout)
    _check_trace(case, world, allow_collectives, sends_per_rank)
    del results
    for rank, ((args, want), orig) in enumerate(zip(per_rank, before)):
        if want is None:
            continue
        got = args[0]
        if not isinstance(got, torch.Tensor):
            raise ExerciseFailure(f"{case}: rank {rank}: the output argument was replaced, not filled in")
        name = "output" if case.collective in BLOCKED else "tensor"
        msg = _compare(case, code, rank, name, got, want)
        if msg:
            raise ExerciseFailure(f"{case.collective}, {case}: {msg}")
        inp = (
            1
            if case.collective in ("all_gather", "reduce_scatter", "scatter", "gather", "all_to_all")
            else None
        )
        if inp is not None and isinstance(args[inp], torch.Tensor) and not torch.equal(args[inp], orig[inp]):
            raise ExerciseFailure(
                f"{case.collective}, {case}: rank {rank} changed its input; leave it as it was"
            )


def _launch(fn: Callable, case: Case, world: LocalWorld, args: Sequence, timeout: float) -> list:
    def body(rank: int):
        return fn(*args[rank])

    try:
        out = world.run(body, return_exceptions=True, join_timeout=4 * timeout + 5)
    except TimeoutError as e:
        raise ExerciseFailure(f"{case.collective}, {case}: hangs: {e}") from None
    for rank, r in enumerate(out):
        if isinstance(r, DeadlockError):
            raise ExerciseFailure(f"{case.collective}, {case}: hangs, {_deadlock(r)}") from None
        if isinstance(r, CollectiveTimeout):
            raise ExerciseFailure(f"{case.collective}, {case}: hangs: rank {rank}: {r}") from None
    for rank, r in enumerate(out):
        if isinstance(r, BaseException) and not isinstance(r, DeadlockError | CollectiveTimeout):
            raise ExerciseFailure(
                f"{case.collective}, {case}: rank {rank} raised {type(r).__name__}: {r}"
            ) from r
    return out


def _deadlock(e: BaseException) -> str:
    text = str(e)
    return text[text.index("deadlock") :] if "deadlock" in text else f"waits forever: {text}"


def _check_trace(case: Case, world: LocalWorld, allow_collectives: bool, sends_per_rank) -> None:
    used = sorted({ev.collective for ev in world.trace if ev.collective not in ("send", "p2p")})
    if used and not allow_collectives:
        raise ExerciseFailure(
            f"{case.collective}, {case}: your function called the package's {', '.join(used)}; "
            "write it from send/recv (mc.send, mc.recv, mc.isend, mc.irecv)"
        )
    if sends_per_rank is not None:
        limit = sends_per_rank(case.p)
        sent = [0] * case.p
        for ev in world.trace:
            sent[ev.src] += 1
        worst = max(range(case.p), key=sent.__getitem__)
        if sent[worst] > limit:
            raise ExerciseFailure(
                f"{case.collective}, {case}: rank {worst} sent {sent[worst]} messages; "
                f"this algorithm sends at most {limit} per rank at world size {case.p}"
            )


def _run_barrier(fn: Callable, case: Case, world: LocalWorld, timeout: float) -> None:
    p = case.p
    arrive, leave = [0.0] * p, [0.0] * p

    def body(rank: int):
        time.sleep(0.03 * ((rank * 3) % p))  # arrive in a scrambled order
        arrive[rank] = time.perf_counter()
        fn()
        leave[rank] = time.perf_counter()

    _launch(lambda rank: body(rank), case, world, [(r,) for r in range(p)], timeout)
    last = max(range(p), key=arrive.__getitem__)
    early = min(range(p), key=leave.__getitem__)
    if leave[early] < arrive[last]:
        t0 = min(arrive)
        raise ExerciseFailure(
            f"barrier, {case}: rank {early} left at {leave[early] - t0:.3f} s, before rank {last} "
            f"arrived at {arrive[last] - t0:.3f} s"
        )


def check_collective(
    fn: Callable,
    collective: str,
    *,
    world_sizes: Sequence[int] = (1, 2, 3, 4, 5, 8),
    dtypes: Sequence[torch.dtype] = (torch.int64, torch.float32),  # int64 first: its failures decode fully
    counts: Sequence[int] = (0, 1, 2, 5, 17),
    roots: Sequence[int] | None = None,
    timeout: float = 5.0,
    sends_per_rank: Callable[[int], int] | None = None,
    allow_collectives: bool = False,
) -> int:
    """Run ``fn`` as ``collective`` on local worlds; raise :class:`ExerciseFailure` if wrong.

    ``fn`` is called on every rank with the arguments of its collective
    (tensors are 1-D; SUM is the reduction)::

        broadcast(tensor, src)         reduce(tensor, dst)          all_reduce(tensor)
        all_gather(output, input)      reduce_scatter(output, input)
        scatter(output, input, src)    gather(output, input, dst)   all_to_all(output, input)
        barrier()

    ``count`` is the whole tensor for broadcast, reduce and all-reduce, and one
    rank's block elsewhere. Rooted collectives are tried with ``roots`` (by
    default the first and the last rank). ``sends_per_rank(p)`` caps the
    messages any rank may send. Returns the number of cases that passed.
    """
    if collective not in COLLECTIVES:
        raise ValueError(f"collective must be one of {COLLECTIVES}, got {collective!r}")
    n_cases = 0
    counts = (0,) if collective == "barrier" else counts
    dtypes = (torch.float32,) if collective == "barrier" else dtypes
    for p in world_sizes:
        root_list = roots if roots is not None else sorted({0, p - 1})
        root_list = [r for r in root_list if r < p] if collective in ROOTED else [None]
        for dtype in dtypes:
            for count in counts:
                for root in root_list:
                    _run_case(
                        fn,
                        Case(collective, p, dtype, count, root),
                        timeout,
                        allow_collectives,
                        sends_per_rank,
                    )
                    n_cases += 1
    sizes = ", ".join(map(str, world_sizes))
    print(f"Correct: {collective} passes all {n_cases} cases (world sizes {sizes}; counts {list(counts)})")
    return n_cases
