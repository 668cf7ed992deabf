"""One collective on one size, run by one of our algorithms or natively.

A :class:`Case` owns the buffers of a call (allocated once, reused by every
iteration and algorithm, as nccl-tests does) and knows how to

* ``call(algorithm)``: run the collective once, ``"native"`` meaning the
  backend's own ``torch.distributed`` collective;
* ``check(algorithm)``: fill the inputs with known values, run once and count
  the wrong elements (nccl-tests' ``#wrong``).

The ``size`` of a case is nccl-tests' (see :mod:`.factors`); ``count`` is its
elements.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.distributed as dist

import mycollectives as mc

from .factors import count_for

NATIVE = "native"

_DIST_OPS = {"sum": "SUM", "prod": "PRODUCT", "min": "MIN", "max": "MAX", "avg": "AVG"}
_MC_OPS = {"sum": mc.ReduceOp.SUM, "prod": mc.ReduceOp.PRODUCT, "min": mc.ReduceOp.MIN,
           "max": mc.ReduceOp.MAX, "avg": mc.ReduceOp.AVG}  # fmt: skip


def pattern(rank: int, n: int, dtype: torch.dtype, device) -> torch.Tensor:
    """Rank ``rank``'s check input: small integers, exact in every dtype."""
    return ((torch.arange(n, device=device) % 7) + rank + 1).to(dtype)


@dataclass
class Case:
    collective: str
    nbytes: int
    dtype: torch.dtype
    redop: str = "sum"
    root: int = 0
    arg_check: bool = False  # our argument handshake (torch.distributed has none)
    group: object = None
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))

    def __post_init__(self):
        self.rank = dist.get_rank(self.group)
        self.p = dist.get_world_size(self.group)
        item = torch.empty(0, dtype=self.dtype).element_size()
        self.count = count_for(self.collective, self.nbytes, self.p, item)
        self.bytes = self.count * item  # what the size column shows
        self.block = self.count // self.p
        z = lambda n: torch.zeros(n, dtype=self.dtype, device=self.device)  # noqa: E731
        c = self.collective
        if c in ("all_reduce", "broadcast", "reduce"):
            self.bufs = {"t": z(self.count)}
        elif c == "all_gather":
            self.bufs = {"in": z(self.block), "out": z(self.count)}
        elif c == "reduce_scatter":
            self.bufs = {"in": z(self.count), "out": z(self.block)}
        elif c == "all_to_all":
            self.bufs = {"in": z(self.count), "out": z(self.count)}
        elif c in ("scatter", "gather"):
            self.bufs = {"t": z(self.block), "list": [z(self.block) for _ in range(self.p)]}
        else:
            raise ValueError(f"the benchmark does not cover {c!r}")
        self.native_ok: bool | None = None

    # --- running -------------------------------------------------------------
    def call(self, algorithm: str) -> None:
        if algorithm == NATIVE:
            self._native()
        else:
            self._ours(algorithm)

    def _ours(self, alg: str) -> None:
        b, c, kw = self.bufs, self.collective, {"algorithm": alg, "check": self.arg_check}
        op, g, root = _MC_OPS[self.redop], self.group, self.root
        if c == "all_reduce":
            mc.all_reduce(b["t"], op, g, **kw)
        elif c == "broadcast":
            mc.broadcast(b["t"], root, g, **kw)
        elif c == "reduce":
            mc.reduce(b["t"], root, op, g, **kw)
        elif c == "all_gather":
            mc.all_gather_into_tensor(b["out"], b["in"], g, **kw)
        elif c == "reduce_scatter":
            mc.reduce_scatter_tensor(b["out"], b["in"], op, g, **kw)
        elif c == "all_to_all":
            mc.all_to_all_single(b["out"], b["in"], group=g, **kw)
        elif c == "scatter":
            mc.scatter(b["t"], b["list"] if self.rank == root else None, root, g, **kw)
        elif c == "gather":
            mc.gather(b["t"], b["list"] if self.rank == root else None, root, g, **kw)

    def _native(self) -> None:
        b, c, g = self.bufs, self.collective, self.group
        op = getattr(dist.ReduceOp, _DIST_OPS[self.redop])
        root = dist.get_global_rank(g, self.root) if g is not None else self.root
        if c == "all_reduce":
            dist.all_reduce(b["t"], op, g)
        elif c == "broadcast":
            dist.broadcast(b["t"], root, g)
        elif c == "reduce":
            dist.reduce(b["t"], root, op, g)
        elif c == "all_gather":
            dist.all_gather_into_tensor(b["out"], b["in"], g)
        elif c == "reduce_scatter":
            dist.reduce_scatter_tensor(b["out"], b["in"], op, g)
        elif c == "all_to_all":
            dist.all_to_all_single(b["out"], b["in"], group=g)
        elif c == "scatter":
            dist.scatter(b["t"], b["list"] if self.rank == root else None, root, g)
        elif c == "gather":
            dist.gather(b["t"], b["list"] if self.rank == root else None, root, g)

    def native_supported(self) -> bool:
        """Whether the backend has this collective (gloo lacks some); every rank agrees."""
        if self.native_ok is None:
            try:
                self._native()
                ok = 1
            except (RuntimeError, ValueError, NotImplementedError):
                ok = 0
            flag = torch.tensor([ok], device=self.device)
            dist.all_reduce(flag, dist.ReduceOp.MIN, self.group)
            self.native_ok = bool(flag.item())
        return self.native_ok

    # --- checking ------------------------------------------------------------
    def check(self, algorithm: str) -> int:
        """Run once on known inputs; the number of wrong elements on this rank."""
        p, r, c, b = self.p, self.rank, self.collective, self.bufs
        dev, dt = self.device, self.dtype
        ins = [
            pattern(k, self.count if c not in ("scatter", "gather") else self.block, dt, dev)
            for k in range(p)
        ]
        if c in ("all_reduce", "broadcast", "reduce"):
            b["t"].copy_(ins[r])
        elif c == "all_gather":
            b["in"].copy_(ins[r][: self.block])
        elif c in ("reduce_scatter", "all_to_all"):
            b["in"].copy_(ins[r])
        elif c == "scatter":
            for k, t in enumerate(b["list"]):
                t.copy_(ins[k])
        elif c == "gather":
            b["t"].copy_(ins[r])
        self.call(algorithm)
        got, want = self._expected(ins)
        wrong = int((got != want).sum()) if got is not None else 0
        for t in self.bufs.values():  # back to zeros for timing (no overflow)
            for x in t if isinstance(t, list) else [t]:
                x.zero_()
        return wrong

    def _expected(self, ins):
        p, r, c, b, n = self.p, self.rank, self.collective, self.bufs, self.block
        stack = torch.stack(ins)
        red = {
            "sum": lambda s: s.sum(0),
            "prod": lambda s: s.prod(0),
            "min": lambda s: s.min(0).values,
            "max": lambda s: s.max(0).values,
            "avg": lambda s: s.sum(0) / p,
        }[self.redop]
        if c == "all_reduce":
            return b["t"], red(stack.double()).to(self.dtype)
        if c == "reduce":
            return (b["t"], red(stack.double()).to(self.dtype)) if r == self.root else (None, None)
        if c == "broadcast":
            return b["t"], ins[self.root]
        if c == "all_gather":
            return b["out"], torch.cat([x[:n] for x in ins])
        if c == "reduce_scatter":
            return b["out"], red(stack.double()).to(self.dtype)[r * n : (r + 1) * n]
        if c == "all_to_all":
            return b["out"], torch.cat([x[r * n : (r + 1) * n] for x in ins])
        if c == "scatter":
            return b["t"], ins[r]
        if c == "gather":
            return (torch.cat(b["list"]), torch.cat(ins)) if r == self.root else (None, None)
        raise ValueError(c)
