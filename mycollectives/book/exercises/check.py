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
rank was added in (so a wrong sum "misses rank 2"). Chapters 2, 3 and 3b use it, and
chapter 4 through ``check_hierarchical_all_reduce``.
The inputs, expected results and the decoding of wrong values live in
``expected.py`` beside this module; this one runs the reader's function.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import torch

from ...collectives import COLLECTIVES, record
from ...errors import CollectiveTimeout, DeadlockError
from ...transport import LocalWorld
from .answers import exercise, need
from .expected import Case, Code, compare, inputs
from .messages import Pattern


class ExerciseFailure(AssertionError):
    """The reader's function gave a wrong result, raised, or hung; the
    message says in which case, on which rank, and what is wrong."""


def _run_case(
    fn: Callable, case: Case, timeout: float, allow_collectives: bool, sends_per_rank, messages
) -> None:
    p = case.p
    world = LocalWorld(p, timeout=timeout, eager_bytes=0)
    if not record(case.collective).carries_data:
        _run_barrier(fn, case, world, timeout)
        _check_trace(
            case, world, allow_collectives, sends_per_rank, messages
        )  # the rules hold for barriers too
        return
    code = Code(case, p * case.count)
    per_rank = inputs(case, code)
    before = [[a.clone() if isinstance(a, torch.Tensor) else a for a in args] for args, _ in per_rank]
    results = _launch(fn, case, world, [args for args, _ in per_rank], timeout)
    _check_trace(case, world, allow_collectives, sends_per_rank, messages)
    del results
    for rank, ((args, want), orig) in enumerate(zip(per_rank, before)):
        if want is None:
            continue
        got = args[0]
        if not isinstance(got, torch.Tensor):
            raise ExerciseFailure(f"{case}: rank {rank}: the output argument was replaced, not filled in")
        in_place = record(case.collective).in_place
        name = "tensor" if in_place else "output"
        msg = compare(case, code, rank, name, got, want)
        if msg:
            raise ExerciseFailure(f"{case.collective}, {case}: {msg}")
        if not in_place and isinstance(args[1], torch.Tensor) and not torch.equal(args[1], orig[1]):
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


def _check_trace(case: Case, world: LocalWorld, allow_collectives: bool, sends_per_rank, messages) -> None:
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
    wrong = messages(case, list(world.trace)) if messages is not None else None
    if wrong:
        raise ExerciseFailure(f"{case.collective}, {case}: {wrong}")


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


@exercise
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
    messages: Pattern | None = None,
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
    messages any rank may send; ``messages`` (one of :mod:`.messages`) checks
    that the messages sent, their peers and sizes, are the algorithm's, so
    that data passed through shared Python state fails. Returns the number
    of cases that passed.
    """
    if collective not in COLLECTIVES:
        raise ValueError(f"collective must be one of {COLLECTIVES}, got {collective!r}")
    need(fn, "your function")
    n_cases = 0
    if not record(collective).carries_data:  # a barrier: one call, no tensors to vary
        counts, dtypes = (0,), (torch.float32,)
    for p in world_sizes:
        root_list = roots if roots is not None else sorted({0, p - 1})
        root_list = [r for r in root_list if r < p] if record(collective).rooted else [None]
        for dtype in dtypes:
            for count in counts:
                for root in root_list:
                    _run_case(
                        fn,
                        Case(collective, p, dtype, count, root),
                        timeout,
                        allow_collectives,
                        sends_per_rank,
                        messages,
                    )
                    n_cases += 1
    sizes = ", ".join(map(str, world_sizes))
    print(f"Correct: {collective} passes all {n_cases} cases (world sizes {sizes}; counts {list(counts)})")
    return n_cases
