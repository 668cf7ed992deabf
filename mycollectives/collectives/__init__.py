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

import numpy as np

from .base import COLLECTIVE, Call, Collective, Fold, Piece, Spec
from .kinds import AllGather, AllReduce, AllToAll, Barrier, Broadcast, Gather, Reduce, ReduceScatter, Scatter

__all__ = ["Call", "Collective", "Fold", "Piece", "Spec", "collectives", "functions", "records"]


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
COLLECTIVE.update({c.name: c for c in RECORDS})
ALIASES = {alias: c.name for c in RECORDS for alias in c.aliases}


def records() -> tuple[Collective, ...]:
    """Every collective's record, those added by :func:`add_record` included (read it through
    this function: a copy taken at import misses a record added later)."""
    return tuple(COLLECTIVE.values())


def collectives() -> tuple[str, ...]:
    """The records' names: every collective the package has."""
    return tuple(COLLECTIVE)


def functions() -> tuple[str, ...]:
    """Every API function that runs a collective."""
    return tuple(f for c in COLLECTIVE.values() for f in c.functions)


def __getattr__(name: str):
    """``COLLECTIVES`` and ``FUNCTIONS``, read now (the functions above are the way to read them)."""
    if name == "COLLECTIVES":
        return collectives()
    if name == "FUNCTIONS":
        return functions()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def add_record(c: Collective) -> None:
    """Add a collective's record after import (a test's toy; a new collective
    belongs in :data:`RECORDS`); :func:`collectives` and :func:`functions` name it from now on."""
    if c.name in COLLECTIVE or any(f in ALIASES or f in COLLECTIVE for f in c.aliases):
        raise ValueError(f"a collective called {c.name!r} (or one of its functions {c.functions}) exists")
    COLLECTIVE[c.name] = c
    ALIASES.update({alias: c.name for alias in c.aliases})


def remove_record(name: str) -> None:
    """Undo :func:`add_record`."""
    c = COLLECTIVE.pop(name)
    for alias in c.aliases:
        ALIASES.pop(alias, None)


def canonical(collective: str) -> str:
    """The record's name for ``collective`` or one of torch.distributed's aliases."""
    name = ALIASES.get(collective, collective)
    if name not in COLLECTIVE:
        raise ValueError(
            f"unknown collective {collective!r}; expected one of {collectives() + tuple(ALIASES)}"
        )
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
