"""The step-time calculator for a model known by its size alone: data parallelism (DDP) only.

:func:`~mycollectives.steptime.calculator.step_time` takes a Transformer (:class:`~mycollectives.steptime.config.ModelConfig`),
because tensor, sequence, context, expert and pipeline parallelism need its
shapes. Data parallelism needs only two numbers: the parameters, whose
gradients are all-reduced, and the training FLOPs per sample, which set the
compute. :class:`DenseModel` is such a model (the labs' MLP, say), and
:func:`data_parallel_step` prices one DDP step of it with the calculator's own
pieces: the compute at ``compute_rate``, each all-reduce priced by the cost
model or the simulator (``step.price_rows``), and as much of it hidden
behind the backward pass (two thirds of the compute) as ``Overlap.data`` allows.

``buckets`` gives DDP's buckets, in the order backward launches them: each
is one all-reduce paying its own latency, and the last cannot hide at all
(its gradients are ready only when backward ends). Without ``buckets``, the
gradients are one all-reduce that may hide entirely, as ``step_time`` assumes.

>>> from mycollectives.topology import cluster
>>> mlp = DenseModel("MLP", params=2_000_000, flops_per_sample=12e6)
>>> r = data_parallel_step(mlp, Layout(dp=8, micro_batch=16), cluster("dgx_h100"), compute_rate=1e12,
...                        buckets=[4e6, 4e6])
>>> round(r.compute * 1e6), len(r.rows), r.rows[-1].hidden
(192, 2, 0.0)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ..topology import Topology
from .layout import Layout
from .step import Overlap, Row, price_rows
from .traffic import Comm


@dataclass(frozen=True)
class DenseModel:
    """A model by its size: ``params`` (all trained), training ``flops_per_sample`` (forward
    and backward), and bytes per parameter and per gradient (float32: 4)."""

    name: str
    params: int
    flops_per_sample: float
    param_bytes: int = 4
    grad_bytes: int = 4

    def __post_init__(self) -> None:
        if isinstance(self.params, bool) or not isinstance(self.params, int) or self.params < 1:
            raise ValueError(f"DenseModel {self.name!r}: params must be a positive int, got {self.params!r}")
        f = self.flops_per_sample
        if isinstance(f, bool) or not isinstance(f, (int, float)) or not math.isfinite(f) or f <= 0:
            raise ValueError(f"DenseModel {self.name!r}: flops_per_sample must be a number > 0, got {f!r}")

    @classmethod
    def of(cls, module, name: str | None = None, grad_bytes: int = 4) -> DenseModel:
        """A ``torch.nn`` model of Linear layers (and elementwise ones): its parameters, and
        ``6`` FLOPs per weight of each Linear per sample (forward 2, backward 4)."""
        from torch import nn

        params = sum(p.numel() for p in module.parameters())
        weights = sum(m.weight.numel() for m in module.modules() if isinstance(m, nn.Linear))
        return cls(name or type(module).__name__, params, 6.0 * weights, grad_bytes, grad_bytes)


@dataclass(frozen=True)
class DenseStep:
    """One DDP step of a :class:`DenseModel`: its compute and the all-reduce rows, per GPU."""

    model: DenseModel
    layout: Layout
    topology: str
    rows: list[Row]
    compute: float

    @property
    def exposed(self) -> float:
        return sum(r.exposed for r in self.rows)

    @property
    def step(self) -> float:
        return self.compute + self.exposed

    @property
    def communication(self) -> float:
        return sum(r.time for r in self.rows)


def data_parallel_step(
    model: DenseModel,
    layout: Layout,
    topology: Topology,
    *,
    compute_rate: float,
    buckets: Sequence[float] | None = None,
    method: str = "model",
    overlap: bool | Overlap = True,
    protocol: str = "simple",
) -> DenseStep:
    """One DDP step of ``model`` on ``layout.dp`` GPUs of ``topology``, each with
    ``layout.micro_batch * layout.microbatches`` samples (see the module).

    ``buckets``: the bytes of each of DDP's buckets, in launch order (they must
    add up to the gradients' bytes). ``method`` and ``overlap`` as for
    :func:`~mycollectives.steptime.calculator.step_time`.
    """
    others = {a: layout.size(a) for a in ("tp", "cp", "pp", "ep")}
    if any(v > 1 for v in others.values()) or layout.zero:
        raise ValueError(
            f"data_parallel_step: {model.name} is known by its size only, so the layout may use data "
            f"parallelism (dp, zero=0) only; got {layout.describe()} (zero={layout.zero})"
        )
    if method not in ("model", "sim"):
        raise ValueError(f"data_parallel_step: method must be 'model' or 'sim', got {method!r}")
    if not isinstance(compute_rate, (int, float)) or not compute_rate > 0:
        raise ValueError(f"data_parallel_step: compute_rate must be FLOP/s > 0, got {compute_rate!r}")
    grads = model.params * model.grad_bytes
    fractions = overlap if isinstance(overlap, Overlap) else Overlap() if overlap else Overlap.none()
    m = layout.microbatches
    compute = model.flops_per_sample * layout.micro_batch * m / compute_rate
    backward = 2 / 3 * compute / m  # the last micro-batch's backward pass
    if buckets is None:
        call = Comm("DP", "all_reduce", ("dp",), grads, 1, "backward", "AR(Psi g) once per step")
        rows = price_rows([call], layout, topology, {"backward": backward}, fractions, method, protocol)
        return DenseStep(model, layout, topology.name, rows, compute)
    sizes = _checked(buckets, grads)
    calls = [
        Comm("DP", "all_reduce", ("dp",), b, 1, "backward", f"AR(bucket {k})") for k, b in enumerate(sizes)
    ]
    rows = price_rows(calls, layout, topology, {}, Overlap.none(), method, protocol)
    hidden = stream_hidden([r.time for r in rows], sizes, backward)
    rows = [replace(r, hidden=fractions.data * h) for r, h in zip(rows, hidden)]
    return DenseStep(model, layout, topology.name, rows, compute)


def stream_hidden(times: Sequence[float], sizes: Sequence[float], backward: float) -> list[float]:
    """Seconds of each bucket's all-reduce that run during a backward pass of ``backward`` seconds.

    Backward produces the gradients at an even pace in FLOPs, and a layer's FLOPs
    go with its parameters, so bucket ``k`` is ready once backward has done the
    share of the bytes of buckets ``0..k``; the stream runs one all-reduce at a
    time: it starts at the later of its bucket's readiness and the previous one's end.

    >>> stream_hidden([3.0, 3.0], [1, 1], backward=4.0)  # ready at 2 and 4: 2-5 hides 2, 5-8 nothing
    [2.0, 0.0]
    """
    total, done, end, out = float(sum(sizes)), 0.0, 0.0, []
    for t, b in zip(times, sizes):
        done += b
        start = max(backward * done / total, end)
        end = start + t
        out.append(max(0.0, min(end, backward) - start))
    return out


def _checked(buckets: Sequence[float], grads: int) -> list[float]:
    sizes = [float(b) for b in buckets]
    if not sizes or any(not b > 0 for b in sizes) or not math.isclose(sum(sizes), grads, rel_tol=1e-6):
        raise ValueError(
            f"data_parallel_step: buckets must be positive byte counts adding up to the gradients' "
            f"{grads} bytes, got {list(buckets)!r}"
        )
    return sizes
