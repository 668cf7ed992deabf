"""One collective on one size, run by one of our algorithms or natively.

A :class:`Case` owns the buffers of a call (allocated once, reused by every
iteration and algorithm, as nccl-tests does) and knows how to

* ``call(algorithm)``: run the collective once, ``"native"`` meaning the
  backend's own ``torch.distributed`` collective;
* ``check(algorithm)``: fill the inputs with known values, run once and count
  the wrong elements (nccl-tests' ``#wrong``).

Everything that depends on the collective comes from its record
(:mod:`mycollectives.collectives`): the size of the buffers, the call, the
expected result. The same call runs our package and torch.distributed,
whose signatures it shares.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from .. import api as mc
from ..collectives import numpy_reduce, record

NATIVE = "native"

_OPS = {"sum": "SUM", "prod": "PRODUCT", "min": "MIN", "max": "MAX", "avg": "AVG"}


def pattern(rank: int, n: int, dtype: torch.dtype, device) -> torch.Tensor:
    """Rank ``rank``'s check input: small integers, exact in every dtype."""
    return ((torch.arange(n, device=device) % 7) + rank + 1).to(dtype)


def _numel(pieces) -> int:
    return sum(count for _, _, count in pieces)


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
        self.record = c = record(self.collective)
        item = torch.empty(0, dtype=self.dtype).element_size()
        self.spec = c.spec(self.p, self.nbytes, item, **({"root": self.root} if c.rooted else {}))
        self.bytes = c.size(self.spec, item)  # what the size column shows
        self.count = self.bytes // item
        z = lambda n: torch.zeros(n, dtype=self.dtype, device=self.device)  # noqa: E731
        self.inp = z(_numel(c.input_at(self.spec, self.rank)))
        self.out = self.inp if c.in_place else z(_numel(c.output_at(self.spec, self.rank)))
        self.global_root = (
            dist.get_global_rank(self.group, self.root) if self.group is not None else self.root
        )
        self.native_ok: bool | None = None

    # --- running -------------------------------------------------------------
    def call(self, algorithm: str) -> None:
        native = algorithm == NATIVE
        lib, kw = (dist, {}) if native else (mc, {"algorithm": algorithm, "check": self.arg_check})
        op = getattr(lib.ReduceOp, _OPS[self.redop]) if self.record.reducing else None
        self.record.call(
            lib, self.inp, self.out, op, self.global_root, self.group, self.rank, spec=self.spec, **kw
        )

    def native_supported(self) -> bool:
        """Whether the backend has this collective (gloo lacks some, torch.distributed
        others); every rank agrees. Whatever the backend raises means no."""
        if self.native_ok is None:
            ok = int(self.record.in_torch)
            if ok:
                try:
                    self.call(NATIVE)
                except Exception:  # noqa: BLE001 - any refusal of the backend's, named or not
                    ok = 0
            flag = torch.tensor([ok], device=self.device)
            dist.all_reduce(flag, dist.ReduceOp.MIN, self.group)
            self.native_ok = bool(flag.item())
        return self.native_ok

    # --- checking ------------------------------------------------------------
    def check(self, algorithm: str) -> int:
        """Run once on known inputs; the number of wrong elements on this rank."""
        c, spec = self.record, self.spec
        ins = [
            pattern(k, _numel(c.input_at(spec, k)), self.dtype, self.device) if c.has_input(spec, k) else None
            for k in range(self.p)
        ]
        if ins[self.rank] is not None:
            self.inp.copy_(ins[self.rank])
        self.call(algorithm)
        wrong = 0
        if c.has_output(spec, self.rank):
            arrays = [x.double().cpu().numpy() if x is not None else None for x in ins]
            want = c.oracle(spec, arrays, numpy_reduce(self.redop))[self.rank]
            wrong = int((self.out != torch.from_numpy(want).to(self.dtype).to(self.device)).sum())
        self.inp.zero_()  # back to zeros for timing (no overflow)
        self.out.zero_()
        return wrong
