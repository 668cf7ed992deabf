"""One test case of a collective: inputs per rank, the call through mycollectives,
the same call through torch.distributed, and a NumPy oracle.

Inputs are small integers (or powers of two for PRODUCT), so every reduction
is exact in every dtype, bfloat16 included, whatever the order of additions:
results can be compared for equality, except AVG's final division.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist

import mycollectives as mc
from mycollectives.collectives import RECORDS, Spec, numpy_reduce, record

DTYPES = {
    "float32": torch.float32,
    "float64": torch.float64,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "int32": torch.int32,
    "int64": torch.int64,
}
# every API function, under the record of the collective it runs
APIS = {f: c for c in RECORDS for f in c.functions}


class _Having:
    """The API functions whose record has a fact (``api in REDUCING``), asked of
    the record at the time, so that a collective registered later counts too."""

    def __init__(self, fact: str):
        self.fact = fact

    def __contains__(self, api: str) -> bool:
        return bool(getattr(record(api), self.fact))


REDUCING, ROOTED = _Having("reducing"), _Having("rooted")


def variants(c) -> tuple[str, ...]:
    """A collective's distinct forms, the tensor form first (a function that is
    another's newer name, run by the same form, is left out)."""
    first: dict = {}
    for f, form in c.forms.items():
        first.setdefault(form, f)
    return tuple(first.values())


VARIANTS = {c.name: variants(c) for c in RECORDS}


def ops_for(dtype: str) -> list[str]:
    ops = ["SUM", "PRODUCT", "MIN", "MAX"]
    return ops + ["AVG"] if DTYPES[dtype].is_floating_point else ops + ["BAND", "BOR", "BXOR"]


@dataclass(frozen=True)
class Case:
    api: str  # the mycollectives / torch.distributed function
    algorithm: str
    p: int
    n: int  # elements per rank (vector or block)
    dtype: str = "float32"
    op: str | None = None
    root: int = 0
    seed: int = 0
    random: bool = False  # normal floats instead of small integers (large-size cases)
    options: tuple = ()

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES.get(self.dtype) or getattr(torch, self.dtype)


def spec(case: Case) -> Spec:
    """The call of ``case``, as its record draws an example of that size."""
    return record(case.api).example(case.p, case.n, case.root, np.random.default_rng(case.seed + 7))


def values(case: Case, rank: int, numel: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(case.seed * 1009 + rank)
    if case.random:
        return torch.randn(numel, generator=g, dtype=torch.float64).to(case.torch_dtype)
    if case.op == "PRODUCT":
        x = torch.tensor([-2, -1, 1, 2])[torch.randint(0, 4, (numel,), generator=g)]
    elif case.op is None:
        x = (torch.arange(numel) * 7 + rank * 31) % 200 - 100
    else:
        x = torch.randint(-3, 4, (numel,), generator=g)
    return x.to(case.torch_dtype)


def _numel(pieces) -> int:
    return sum(count for _, _, count in pieces)


def inputs(case: Case, rank: int) -> torch.Tensor:
    """``rank``'s flat input, where its record puts it (fresh every call; a rank
    without input gets values too, which the collective must ignore or overwrite)."""
    s = spec(case)
    return values(case, rank, _numel(record(case.api).input_at(s, rank)))


def call(case: Case, rank: int, impl: str, group=None) -> list[np.ndarray]:
    """Run ``case`` on this rank through ``impl`` ("mc" or "torch"); return its
    flat output, or nothing where the rank has none (torch leaves a reduce's
    non-root tensors unspecified). torch.distributed runs each collective's
    first form (gloo has no list all-to-all); a collective it lacks is
    answered by the oracle."""
    c, s = record(case.api), spec(case)
    if impl == "torch" and not c.in_torch:
        return oracle(case)[rank]
    lib = mc if impl == "mc" else dist
    kw = {"algorithm": case.algorithm, **dict(case.options)} if impl == "mc" else {}
    op = getattr(mc.ReduceOp if impl == "mc" else dist.ReduceOp, case.op) if case.op else None
    avg_by_hand = impl == "torch" and case.op == "AVG"  # gloo has no AVG
    if avg_by_hand:
        op = dist.ReduceOp.SUM
    inp = inputs(case, rank)
    out = inp if c.in_place else torch.zeros(_numel(c.output_at(s, rank)), dtype=case.torch_dtype)
    root = dist.get_global_rank(group, case.root) if impl == "torch" and group is not None else case.root
    function = case.api if impl == "mc" else c.functions[0]
    c.call(lib, inp, out, op, root, group, rank, spec=s, function=function, **kw)
    if not c.has_output(s, rank):
        return []
    if avg_by_hand:
        out = out.div_(case.p)
    return [out.float().numpy().copy() if out.dtype == torch.bfloat16 else out.numpy().copy()]


def oracle(case: Case) -> list[list[np.ndarray]]:
    """What every rank's output must be: the collective's record's NumPy oracle
    on every rank's input (nothing where a rank has no output)."""
    c, s = record(case.api), spec(case)
    flat = [inputs(case, r).double().numpy() for r in range(case.p)]
    if case.op in ("BAND", "BOR", "BXOR"):  # bitwise: on the integers themselves
        flat = [x.astype(np.int64) for x in flat]
    outs = c.oracle(
        s, [x if c.has_input(s, r) else None for r, x in enumerate(flat)], numpy_reduce(case.op or "SUM")
    )
    return [[o] if o is not None and c.has_output(s, r) else [] for r, o in enumerate(outs)]


def compare(case: Case, rank: int, got: list[np.ndarray], want: list[np.ndarray]) -> str | None:
    """None if equal (to rounding, for AVG and random inputs), else what differs."""
    if len(got) != len(want):
        return f"{case} rank {rank}: {len(got)} outputs, expected {len(want)}"
    half = case.dtype in ("float16", "bfloat16")
    loose = case.op == "AVG" or case.random
    rtol = (1e-2 if half else 1e-5) if loose else 0
    for i, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g, dtype=np.float64).reshape(-1), np.asarray(w, dtype=np.float64).reshape(-1)
        if g.shape != w.shape:
            return f"{case} rank {rank} output {i}: shape {g.shape}, expected {w.shape}"
        bad = np.flatnonzero(~np.isclose(g, w, rtol=rtol, atol=rtol))
        if len(bad):
            j = int(bad[0])
            return (
                f"{case} rank {rank} output {i}: element {j} is {g[j]}, expected {w[j]} "
                f"({len(bad)} of {len(g)} elements differ)"
            )
    return None
