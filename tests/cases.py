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
from mycollectives.collectives import RECORDS, Spec, numpy_reduce

DTYPES = {
    "float32": torch.float32,
    "float64": torch.float64,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "int32": torch.int32,
    "int64": torch.int64,
}
# every torch.distributed function, under the record of the collective it runs
APIS = {c.name: c for c in RECORDS} | {alias: c for c in RECORDS for alias in c.aliases}
REDUCING = {api for api, c in APIS.items() if c.reducing}
ROOTED = {api for api, c in APIS.items() if c.rooted}
VARIANTS = {c.name: (*c.aliases, c.name) for c in RECORDS if c.aliases}  # the tensor form first


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


def splits(case: Case) -> np.ndarray:
    """Rows each rank sends each rank in all-to-all: uneven, zeros included."""
    rng = np.random.default_rng(case.seed + 7)
    if case.n == 0:
        return np.zeros((case.p, case.p), dtype=np.int64)
    return rng.integers(0, max(case.n, 1) + 1, (case.p, case.p))


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


def inputs(case: Case, rank: int) -> dict:
    """The arguments of ``case.api`` on ``rank`` (fresh tensors every call)."""
    p, n, dt = case.p, case.n, case.torch_dtype
    api = case.api
    if api in ("broadcast", "reduce", "all_reduce"):
        return {"tensor": values(case, rank, n)}
    if api in ("all_gather_into_tensor", "all_gather"):
        return {"input": values(case, rank, n), "p": p}
    if api in ("reduce_scatter_tensor", "reduce_scatter"):
        return {"input": values(case, rank, p * n), "n": n}
    if api == "scatter":
        full = values(case, rank, p * n)
        return {"tensor": torch.zeros(n, dtype=dt), "list": list(full.split(n)) if n else [full[:0]] * p}
    if api == "gather":
        return {"tensor": values(case, rank, n), "p": p}
    if api in ("all_to_all_single", "all_to_all"):
        m = splits(case)
        rows_in, rows_out = m[rank], m[:, rank]
        x = values(case, rank, int(rows_in.sum()) * 2).reshape(-1, 2)
        return {"input": x, "in": rows_in.tolist(), "out": rows_out.tolist()}
    raise ValueError(api)


def call(case: Case, rank: int, impl: str, group=None) -> list[np.ndarray]:
    """Run ``case`` on this rank through ``impl`` ("mc" or "torch"); return the outputs."""
    a = inputs(case, rank)
    lib = mc if impl == "mc" else dist
    kw = {"algorithm": case.algorithm, **dict(case.options)} if impl == "mc" else {}
    op = getattr(mc.ReduceOp if impl == "mc" else dist.ReduceOp, case.op) if case.op else None
    avg_by_hand = impl == "torch" and case.op == "AVG"  # gloo has no AVG
    if avg_by_hand:
        op = dist.ReduceOp.SUM
    api, p, dt = case.api, case.p, case.torch_dtype
    if api == "broadcast":
        lib.broadcast(a["tensor"], case.root, group, **kw)
        outs = [a["tensor"]]
    elif api == "all_reduce":
        lib.all_reduce(a["tensor"], op, group, **kw)
        outs = [a["tensor"]]
    elif api == "reduce":
        lib.reduce(a["tensor"], case.root, op, group, **kw)
        outs = [a["tensor"]] if rank == case.root or impl == "mc" else []
    elif api == "all_gather_into_tensor":
        out = torch.zeros(p * case.n, dtype=dt)
        lib.all_gather_into_tensor(out, a["input"], group, **kw)
        outs = [out]
    elif api == "all_gather":
        outs = [torch.zeros(case.n, dtype=dt) for _ in range(p)]
        lib.all_gather(outs, a["input"], group, **kw)
    elif api == "reduce_scatter_tensor":
        out = torch.zeros(case.n, dtype=dt)
        lib.reduce_scatter_tensor(out, a["input"], op, group, **kw)
        outs = [out]
    elif api == "reduce_scatter":
        out = torch.zeros(case.n, dtype=dt)
        lib.reduce_scatter(
            out, list(a["input"].split(case.n)) if case.n else [a["input"]] * p, op, group, **kw
        )
        outs = [out]
    elif api == "scatter":
        lib.scatter(a["tensor"], a["list"] if rank == case.root else None, case.root, group, **kw)
        outs = [a["tensor"]]
    elif api == "gather":
        outs = [torch.zeros(case.n, dtype=dt) for _ in range(p)] if rank == case.root else None
        lib.gather(a["tensor"], outs, case.root, group, **kw)
        outs = outs or []
    elif api == "all_to_all_single":
        out = torch.zeros(sum(a["out"]), 2, dtype=dt)
        lib.all_to_all_single(out, a["input"], a["out"], a["in"], group, **kw)
        outs = [out]
    elif api == "all_to_all" and impl == "torch":  # gloo has no list all_to_all: same data, single form
        out = torch.zeros(sum(a["out"]), 2, dtype=dt)
        dist.all_to_all_single(out, a["input"], a["out"], a["in"], group)
        outs = list(out.split(a["out"]))
    elif api == "all_to_all":
        ins = list(a["input"].split(a["in"]))
        outs = [torch.zeros(r, 2, dtype=dt) for r in a["out"]]
        lib.all_to_all(outs, ins, group, **kw)
    else:
        raise ValueError(api)
    if avg_by_hand and outs:
        outs = [o.div_(p) for o in outs]
    if api == "reduce" and impl == "mc" and rank != case.root:
        outs = []  # torch leaves non-root tensors unspecified; compared separately
    return [o.float().numpy().copy() if o.dtype == torch.bfloat16 else o.numpy().copy() for o in outs]


def oracle(case: Case) -> list[list[np.ndarray]]:
    """What every rank's outputs must be: the collective's record's NumPy oracle
    on every rank's inputs, flattened, then cut as ``case.api`` returns them."""
    p, n, c = case.p, case.n, APIS[case.api]
    ins = [inputs(case, r) for r in range(p)]
    if c.name == "all_to_all":
        m = splits(case) * 2  # rows of two elements
        spec = Spec(c.name, p, splits=tuple(map(tuple, m.tolist())))
        flat = [a["input"].double().numpy().reshape(-1) for a in ins]
    else:
        spec = Spec(c.name, p, count=n, root=case.root)
        key = "list" if c.name == "scatter" else "tensor" if c.in_place or c.name == "gather" else "input"
        flat = [_flat(a[key]) for a in ins]
    if case.op in ("BAND", "BOR", "BXOR"):  # bitwise: on the integers themselves
        flat = [x.astype(np.int64) for x in flat]
    outs = c.oracle(
        spec,
        [x if c.has_input(spec, r) else None for r, x in enumerate(flat)],
        numpy_reduce(case.op or "SUM"),
    )
    if c.name == "all_to_all":
        rows = [o.reshape(-1, 2) for o in outs]
        if case.api == "all_to_all":
            return [np.split(rows[r], np.cumsum(splits(case)[:, r])[:-1]) for r in range(p)]
        return [[x] for x in rows]
    if case.api in ("all_gather", "gather"):  # the list forms: one tensor per rank
        return [np.split(o, p) if o is not None else [] for o in outs]
    return [[o] if o is not None else [] for o in outs]


def _flat(x) -> np.ndarray:
    if isinstance(x, list):
        return np.concatenate([t.double().numpy().reshape(-1) for t in x]) if x else np.zeros(0)
    return x.double().numpy().reshape(-1)


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
