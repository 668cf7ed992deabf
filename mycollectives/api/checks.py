"""Argument checks that run before any byte moves.

Every message names the function, the rank, the argument and what was
expected, in the form ``all_reduce on rank 2: argument 'tensor' ...``.
"""

from __future__ import annotations

import numbers

import torch

from .. import datafree


class Checker:
    """Checks the arguments of one call on one rank."""

    def __init__(self, fn: str, rank: int, world_size: int, device: torch.device | None = None):
        self.fn, self.rank, self.p, self.device = fn, rank, world_size, device

    def fail(self, arg: str, problem: str, kind: type[Exception] = ValueError) -> Exception:
        return kind(f"{self.fn} on rank {self.rank}: argument '{arg}' {problem}")

    def tensor(self, arg: str, t, like: torch.Tensor | None = None) -> torch.Tensor:
        if not isinstance(t, torch.Tensor):
            raise self.fail(arg, f"must be a torch.Tensor, got {type(t).__name__}", TypeError)
        if t.is_sparse or t.layout != torch.strided:
            raise self.fail(arg, f"must be a dense (strided) tensor, got layout {t.layout}")
        if t.device.type == "meta" and not datafree.active():
            raise self.fail(arg, "is a meta tensor, which has no data to send; give a tensor with storage")
        if not t.is_contiguous():
            raise self.fail(arg, "must be contiguous; call .contiguous() on it first")
        if like is not None and t.dtype != like.dtype:
            raise self.fail(
                arg, f"has dtype {t.dtype}; expected {like.dtype}, the dtype of the other tensors", TypeError
            )
        if like is not None and t.device != like.device:
            raise self.fail(arg, f"is on {t.device}; expected {like.device}, like the other tensors")
        if self.device is not None and t.device.type != self.device.type:
            raise self.fail(arg, f"is on {t.device}; this group's backend needs {self.device.type} tensors")
        return t

    def tensor_list(self, arg: str, ts, like: torch.Tensor, numel: int | None) -> list[torch.Tensor]:
        if not isinstance(ts, (list, tuple)):
            raise self.fail(arg, f"must be a list of {self.p} tensors, got {type(ts).__name__}", TypeError)
        if len(ts) != self.p:
            raise self.fail(arg, f"has {len(ts)} tensors; expected one per rank, {self.p}")
        for i, t in enumerate(ts):
            self.tensor(f"{arg}[{i}]", t, like)
            if numel is not None and t.numel() != numel:
                raise self.fail(f"{arg}[{i}]", f"has {t.numel()} elements; expected {numel}")
        return list(ts)

    def numel(self, arg: str, t: torch.Tensor, expected: int, why: str) -> None:
        if t.numel() != expected:
            raise self.fail(arg, f"has {t.numel()} elements; expected {expected} ({why})")

    def rank_arg(self, arg: str, value, to_group) -> int:
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise self.fail(arg, f"must be an int rank, got {value!r}", TypeError)
        try:
            r = to_group(int(value))
        except ValueError:
            r = -1
        if not 0 <= r < self.p:
            raise self.fail(arg, f"is {value}, not a rank of this group of {self.p}")
        return r

    def root(self, arg: str, value, group_value, to_group, default: int | None = None) -> int:
        """A root given as a global rank (``src``/``dst``) or a group rank
        (``group_src``/``group_dst``), as torch.distributed accepts either."""
        if value is not None and group_value is not None:
            raise self.fail(arg, f"and 'group_{arg}' are both given ({value}, {group_value}); give one")
        if group_value is not None:
            return self.rank_arg(f"group_{arg}", group_value, lambda r: r)
        if value is None:
            if default is None:
                raise self.fail(arg, "is required (or give 'group_" + arg + "')")
            return default
        return self.rank_arg(arg, value, to_group)

    def splits(self, arg: str, sizes, dim0: int) -> list[int]:
        if sizes is None or (isinstance(sizes, (list, tuple)) and len(sizes) == 0):
            if dim0 % self.p:
                raise self.fail(arg, f"is not given, so dim 0 ({dim0}) must divide evenly by {self.p} ranks")
            return [dim0 // self.p] * self.p
        if not isinstance(sizes, (list, tuple)) or len(sizes) != self.p:
            raise self.fail(arg, f"must list one size per rank ({self.p}), got {sizes!r}")
        if any(isinstance(s, bool) or not isinstance(s, numbers.Integral) or s < 0 for s in sizes):
            raise self.fail(arg, f"must hold non-negative ints, got {list(sizes)}")
        if sum(sizes) != dim0:
            raise self.fail(arg, f"adds up to {sum(sizes)}, but the tensor has {dim0} rows in dim 0")
        return [int(s) for s in sizes]
