"""A parallel layout: how many ways each strategy splits the work, and where its groups sit.

Ranks are numbered as on a :class:`~mycollectives.parallel.mesh.Mesh` (and ``torch.distributed``'s
``DeviceMesh``): the axes of ``order`` outermost first, the last one
fastest, so a rank of ``Layout(tp=8, pp=2, dp=4)`` sits at
``dp = r // 16, pp = r // 8 % 2, tp = r % 8``. The default,
``("dp", "pp", "cp", "tp")``, is the order Llama 3 describes (Dubey et al.
2024, tensor parallelism innermost): the ranks of a tensor-parallel group
are consecutive, on one node, and those of a data-parallel group are
``tp * cp * pp`` apart, on different nodes. :meth:`Layout.mesh_shape` is
the same grid as a ``Mesh`` shape. Expert parallelism takes the innermost
``ep`` ranks of the data-parallel axis (Megatron-LM's arrangement), and
HSDP's shard groups the innermost ``shard`` ranks of it.

>>> lay = Layout(tp=8, pp=2, dp=4)
>>> lay.world, lay.members(("tp",))[:3], lay.members(("dp",))
(64, [0, 1, 2], [0, 16, 32, 48])
>>> lay.mesh_shape()
{'dp': 4, 'pp': 2, 'cp': 1, 'tp': 8}
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .config import ModelConfig

AXES = ("dp", "pp", "cp", "tp")  # outermost first
RECOMPUTE = ("none", "selective", "full")


@dataclass(frozen=True)
class Layout:
    """Degrees of parallelism, sharding, batch and schedule of one training step.

    ``zero``: 0 data parallelism (DDP), 1 and 2 shard the optimizer state
    (and gradients), 3 shards the parameters too (FSDP). ``shard``: HSDP's
    shard group, a divisor of ``dp`` (``None``: all of ``dp``). A step runs
    ``microbatches`` micro-batches of ``micro_batch`` sequences on each
    data-parallel rank; ``virtual`` pipeline stages per rank interleave the
    pipeline. ``recompute``: activation recomputation, ``"none"``,
    ``"selective"`` (attention recomputed: Korthikanti et al. 2023) or ``"full"``.
    """

    tp: int = 1
    sp: bool = False
    cp: int = 1
    pp: int = 1
    dp: int = 1
    ep: int = 1
    zero: int = 0
    shard: int | None = None
    micro_batch: int = 1
    microbatches: int = 1
    virtual: int = 1
    recompute: str = "selective"
    order: tuple[str, ...] = field(default=AXES)  # outermost first, as Mesh

    def __post_init__(self) -> None:
        for name in ("tp", "cp", "pp", "dp", "ep", "micro_batch", "microbatches", "virtual"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"Layout: {name} must be a positive int, got {v!r}")
        if sorted(self.order) != sorted(AXES):
            raise ValueError(f"Layout: order must name each of {AXES} once, got {self.order}")
        if self.zero not in (0, 1, 2, 3):
            raise ValueError(f"Layout: zero must be 0, 1, 2 or 3, got {self.zero!r}")
        if self.shard is not None and (self.zero != 3 or self.dp % self.shard):
            raise ValueError(f"Layout: shard={self.shard} (HSDP) needs zero=3 and to divide dp={self.dp}")
        if self.sp and self.tp == 1:
            raise ValueError(
                "Layout: sp=True needs tp > 1 (sequence parallelism splits tensor-parallel regions)"
            )
        if self.dp % self.ep:
            raise ValueError(
                f"Layout: ep={self.ep} must divide dp={self.dp} (experts split data-parallel ranks)"
            )
        if self.recompute not in RECOMPUTE:
            raise ValueError(f"Layout: recompute must be one of {RECOMPUTE}, got {self.recompute!r}")

    @property
    def world(self) -> int:
        return self.tp * self.cp * self.pp * self.dp

    def size(self, axis: str) -> int:
        return getattr(self, axis)

    def stride(self, axis: str) -> int:
        """Rank distance between neighbours along ``axis`` (the product of the sizes inside it)."""
        i = self.order.index(axis)
        return math.prod(self.size(a) for a in self.order[i + 1 :])

    def mesh_shape(self) -> dict[str, int]:
        """The layout as a :class:`~mycollectives.parallel.mesh.Mesh` shape: ``Mesh(lay.mesh_shape())`` numbers ranks alike."""
        return {a: self.size(a) for a in self.order}

    def members(self, axes: tuple[str, ...], rank: int = 0) -> list[int]:
        """The ranks of ``rank``'s group along ``axes``; ``"ep"``, ``"shard"``,
        ``"replicate"`` and ``"edp"`` (the expert-data-parallel group) are parts of ``dp``."""
        out = [rank]
        for a in axes:
            size, stride = self._size_and_stride(a)
            base = [r - ((r // stride) % size) * stride for r in out]
            out = [b + i * stride for b in base for i in range(size)]
        return sorted(set(out))

    def _size_and_stride(self, axis: str) -> tuple[int, int]:
        dp_stride = self.stride("dp")
        shard = self.shard or self.dp
        subs = {
            "ep": (self.ep, dp_stride),
            "edp": (self.dp // self.ep, dp_stride * self.ep),
            "shard": (shard, dp_stride),
            "replicate": (self.dp // shard, dp_stride * shard),
        }
        if axis in subs:
            return subs[axis]
        if axis not in AXES:
            raise ValueError(f"Layout: no axis {axis!r}; axes are {AXES} and ep, edp, shard, replicate")
        return self.size(axis), self.stride(axis)

    def check(self, model: ModelConfig) -> None:
        """Raise ``ValueError`` naming the first thing ``model`` cannot be split by."""
        problems = []
        if model.heads % self.tp:
            problems.append(f"heads ({model.heads}) not divisible by tp={self.tp}")
        if model.kv_heads % self.tp and self.tp % model.kv_heads:
            problems.append(f"kv_heads ({model.kv_heads}) and tp={self.tp}: neither divides the other")
        if model.ffn % self.tp:
            problems.append(f"ffn ({model.ffn}) not divisible by tp={self.tp}")
        if model.layers < self.pp * self.virtual:
            problems.append(f"layers ({model.layers}) fewer than pp*virtual={self.pp * self.virtual} stages")
        if model.seq % (self.cp * (self.tp if self.sp else 1)):
            problems.append(f"seq ({model.seq}) not divisible by cp={self.cp} (times tp with sp)")
        if model.experts % self.ep:
            problems.append(f"experts ({model.experts}) not divisible by ep={self.ep}")
        if self.ep > 1 and not model.moe:
            problems.append(f"ep={self.ep} but {model.name} has no experts")
        if problems:
            raise ValueError(f"Layout {self.describe()} cannot split {model.name}: " + "; ".join(problems))

    def stage_layers(self, model: ModelConfig) -> list[int]:
        """Layers on each pipeline stage. When ``pp`` does not divide the layers, the stages
        that hold the most micro-batches in flight give up one layer each, first and last
        alternately: Llama 3 405B's 126 layers on 16 stages are 7, 8, ..., 8, 7 (Dubey et al. 2024)."""
        most = math.ceil(model.layers / self.pp)
        out = [most] * self.pp
        ends = [i // 2 if i % 2 == 0 else self.pp - 1 - i // 2 for i in range(self.pp)]
        for s in ends[: most * self.pp - model.layers]:
            out[s] -= 1
        return out

    def layers_per_stage(self, model: ModelConfig) -> int:
        """Layers on the busiest pipeline stage (stages may be uneven: Llama 3 405B's 126 on 16)."""
        return max(self.stage_layers(model))

    def tokens(self, model: ModelConfig) -> int:
        """Tokens in one step (the global batch)."""
        return self.dp * self.microbatches * self.micro_batch * model.seq

    def describe(self) -> str:
        """Every knob that changes the step: degrees, ZeRO stage, micro-batches, recomputation.

        >>> Layout(tp=8, sp=True, pp=4, dp=32, zero=1, microbatches=16, virtual=5).describe()
        'tp8+sp pp4 dp32 v5 zero1, 16 micro-batches, selective recompute'
        """
        parts = [f"tp{self.tp}" + ("+sp" if self.sp else "")]
        parts += [f"{a}{self.size(a)}" for a in ("cp", "pp", "dp") if self.size(a) > 1]
        if self.virtual > 1:
            parts.append(f"v{self.virtual}")
        if self.ep > 1:
            parts.append(f"ep{self.ep}")
        if self.zero:
            parts.append(f"zero{self.zero}" + (f"(shard {self.shard})" if self.shard else ""))
        m = f"{self.microbatches} micro-batch" + ("es" if self.microbatches > 1 else "")
        if self.micro_batch > 1:
            m += f" of {self.micro_batch}"
        recompute = "no recompute" if self.recompute == "none" else f"{self.recompute} recompute"
        return ", ".join((" ".join(parts), m, recompute))
