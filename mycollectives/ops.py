"""Reduction operators, and which dtypes each one accepts."""

from __future__ import annotations

import enum
from collections.abc import Callable

import torch


class ReduceOp(enum.Enum):
    """The reductions, as in ``torch.distributed.ReduceOp`` (which is accepted too)."""

    SUM = "sum"
    PRODUCT = "product"
    MIN = "min"
    MAX = "max"
    AVG = "avg"
    BAND = "band"
    BOR = "bor"
    BXOR = "bxor"

    def __repr__(self) -> str:
        return f"ReduceOp.{self.name}"


def resolve_op(op) -> ReduceOp:
    """Accept ``mc.ReduceOp``, ``torch.distributed.ReduceOp`` or a name like ``"sum"``."""
    if isinstance(op, ReduceOp):
        return op
    name = getattr(op, "name", None) or (op if isinstance(op, str) else None)
    if name is None:  # torch's ReduceOp wrapper object
        name = str(getattr(op, "op", op)).rsplit(".", 1)[-1]
    if str(name).upper() == "PREMUL_SUM":
        raise ValueError(
            "argument 'op' is PREMUL_SUM, which this package does not support (nor does gloo); "
            "scale the tensor first and reduce with SUM"
        )
    try:
        return ReduceOp[str(name).upper()]
    except KeyError:
        raise ValueError(
            f"argument 'op' is {op!r}, an unsupported op; expected one of {[o.name for o in ReduceOp]}"
        ) from None


def op_dtype_error(op: ReduceOp, dtype: torch.dtype) -> str | None:
    """Why ``op`` cannot reduce ``dtype``, or None if it can."""
    if op is ReduceOp.AVG and not (dtype.is_floating_point or dtype.is_complex):
        return f"AVG needs a floating-point dtype, got {dtype}"
    if op in (ReduceOp.MIN, ReduceOp.MAX) and dtype.is_complex:
        return f"{op.name} is not defined for complex dtype {dtype}"
    if op in BITWISE and (dtype.is_floating_point or dtype.is_complex):
        return f"{op.name} is a bitwise op: it needs an integer or bool dtype, got {dtype}"
    return None


def _minimum(acc: torch.Tensor, x: torch.Tensor) -> None:
    torch.minimum(acc, x, out=acc)


def _maximum(acc: torch.Tensor, x: torch.Tensor) -> None:
    torch.maximum(acc, x, out=acc)


def _add(acc: torch.Tensor, x: torch.Tensor) -> None:
    if acc.dtype == torch.bool:
        acc.logical_or_(x)
    else:
        acc.add_(x)


def _mul(acc: torch.Tensor, x: torch.Tensor) -> None:
    if acc.dtype == torch.bool:
        acc.logical_and_(x)
    else:
        acc.mul_(x)


BITWISE = {
    ReduceOp.BAND: torch.Tensor.bitwise_and_,
    ReduceOp.BOR: torch.Tensor.bitwise_or_,
    ReduceOp.BXOR: torch.Tensor.bitwise_xor_,
}


_COMBINERS = {
    ReduceOp.SUM: _add,
    ReduceOp.AVG: _add,
    ReduceOp.PRODUCT: _mul,
    ReduceOp.MIN: _minimum,
    ReduceOp.MAX: _maximum,
    **BITWISE,
}


def combiner(op: ReduceOp) -> Callable[[torch.Tensor, torch.Tensor], None]:
    """``f(acc, x)`` that folds ``x`` into ``acc`` in place. AVG sums; the
    caller divides by the world size once at the end."""
    return _COMBINERS[op]
