"""What each strategy communicates in one training step, as formulas in the model's sizes (chapter 5).

:func:`comms` lists, for a model and a layout, every collective a GPU takes
part in during one step: which strategy, which collective, over which
group, how many bytes per call (nccl-tests' ``size``: the whole buffer of an
all-reduce, the output of an all-gather, the input of a reduce-scatter, a
rank's sends of an all-to-all, one message of a send/recv) and how many
calls. Symbols, as the docstrings and the chapter use them: ``L`` layers
(``L/pp`` per pipeline stage, rounded up), ``m`` micro-batches of ``b`` sequences of
``s`` tokens, hidden size ``h``, ``a`` bytes per activation, ``Psi`` the
parameters a GPU holds.

The tests check these formulas against the bytes the strategies of this
package actually send on a local world.
"""

from __future__ import annotations

from dataclasses import dataclass

from .config import ModelConfig
from .layout import Layout


@dataclass(frozen=True)
class Comm:
    """One kind of call in a step: ``calls`` calls of ``collective`` of ``nbytes`` over ``axes``.

    ``hides_behind`` names the compute that may overlap it: ``"none"``
    (on the critical path), ``"backward"`` (the last micro-batch's backward
    pass), ``"forward"``, ``"compute"`` (every unit's compute, by prefetch),
    ``"attention"`` or ``"matmul"`` (the matmul it feeds, if a collective
    matmul overlaps them; ``Overlap`` says how much).
    """

    strategy: str
    collective: str  # all_reduce, all_gather, reduce_scatter, all_to_all, send_recv, ring_step
    axes: tuple[str, ...]
    nbytes: float
    calls: float
    hides_behind: str
    formula: str

    @property
    def total(self) -> float:
        return self.nbytes * self.calls


def tokens_per_rank(model: ModelConfig, lay: Layout) -> int:
    """Tokens of one micro-batch on one context-parallel rank: ``b s / cp``."""
    return lay.micro_batch * model.seq // lay.cp


def kv_width(model: ModelConfig, lay: Layout) -> int:
    """Width of K (or V) on one tensor-parallel rank (heads replicated if ``tp > kv_heads``)."""
    return max(model.kv_dim // lay.tp, model.head_dim)


def params_per_gpu(model: ModelConfig, lay: Layout) -> tuple[float, float]:
    """Parameters one GPU holds before data-parallel sharding: (dense, expert).

    Layers are split over ``pp`` stages and every matrix over ``tp``; the
    embeddings are counted as spread over all stages (they sit on the first
    and last); experts are split over ``ep`` ranks.
    """
    per_stage = lay.layers_per_stage(model)
    router = model.hidden * model.experts if model.moe else 0
    dense_layer = model.attention_params + 2 * model.hidden + router + (0 if model.moe else model.mlp_params)
    dense = (per_stage * dense_layer + model.embedding_params / lay.pp) / lay.tp
    expert = per_stage * (model.experts // lay.ep) * model.mlp_params / lay.tp if model.moe else 0.0
    return dense, expert


def comms(model: ModelConfig, lay: Layout) -> list[Comm]:
    """Every collective of one training step, per GPU (see the module docstring)."""
    lay.check(model)
    out = tensor_parallel_comms(model, lay) + context_parallel_comms(model, lay)
    out += expert_parallel_comms(model, lay) + pipeline_comms(model, lay)
    dense, expert = params_per_gpu(model, lay)
    out += data_parallel_comms(model, lay, dense, ("cp", "dp"), "dense")
    if expert:
        out += data_parallel_comms(model, lay, expert, ("cp", "edp"), "experts")
    return [c for c in out if c.nbytes > 0 and c.calls > 0 and _group_size(lay, c.axes) > 1]


def _per_step(model: ModelConfig, lay: Layout) -> tuple[int, int, bool, float]:
    """``L/pp``, ``m``, whether the forward pass runs twice, and one ``[b s/cp, h]`` activation's bytes."""
    act = tokens_per_rank(model, lay) * model.hidden * model.act_bytes
    return lay.layers_per_stage(model), lay.microbatches, lay.recompute == "full", act


def tensor_parallel_comms(model: ModelConfig, lay: Layout) -> list[Comm]:
    """Megatron's all-reduces, or sequence parallelism's gathers and reduce-scatters (and the norms')."""
    L, m, full, act = _per_step(model, lay)
    if lay.tp > 1 and not lay.sp:
        calls = (4 + 2 * full) * L * m
        return [
            Comm("TP", "all_reduce", ("tp",), act, calls, "matmul", "(4 per layer) L/pp m x AR(b s/cp h a)")
        ]
    if not lay.sp:
        return []
    ag, rs = (6 + 2 * full) * L * m, (4 + 2 * full) * L * m
    norms = 2 * model.hidden * L * model.grad_bytes
    return [
        Comm("SP", "all_gather", ("tp",), act, ag, "matmul", "(6 per layer) L/pp m x AG(b s/cp h a)"),
        Comm("SP", "reduce_scatter", ("tp",), act, rs, "matmul", "(4 per layer) L/pp m x RS(b s/cp h a)"),
        Comm("SP", "all_reduce", ("tp",), norms, 1, "backward", "AR(2 h L/pp) of the norm gains"),
    ]


def context_parallel_comms(model: ModelConfig, lay: Layout) -> list[Comm]:
    """Ring attention: K and V forward, K, V, dK and dV backward, and dK, dV home."""
    if lay.cp == 1:
        return []
    L, m, full, _ = _per_step(model, lay)
    block = tokens_per_rank(model, lay) * kv_width(model, lay) * model.act_bytes  # one K (or V) block
    steps = (lay.cp - 1) * L * m
    return [
        Comm(
            "CP", "ring_step", ("cp",), 2 * block, steps * (1 + full), "attention", "(cp-1) L/pp m x (K, V)"
        ),
        Comm("CP", "ring_step", ("cp",), 4 * block, steps, "attention", "(cp-1) L/pp m x (K, V, dK, dV)"),
        Comm("CP", "ring_step", ("cp",), 2 * block, L * m, "attention", "L/pp m x (dK, dV) home"),
    ]


def expert_parallel_comms(model: ModelConfig, lay: Layout) -> list[Comm]:
    """Dispatch and combine, forward and backward: four all-to-alls per layer."""
    if not (model.moe and lay.ep > 1):
        return []
    L, m, full, _ = _per_step(model, lay)
    rows = tokens_per_rank(model, lay) // lay.tp * model.top_k
    nbytes, calls = rows * model.hidden * model.act_bytes, (4 + 2 * full) * L * m
    return [
        Comm(
            "EP",
            "all_to_all",
            ("ep",),
            nbytes,
            calls,
            "none",
            "(4 per layer) L/pp m x A2A(k b s/(cp tp) h a)",
        )
    ]


def pipeline_comms(model: ModelConfig, lay: Layout) -> list[Comm]:
    """One activation down and one gradient up per micro-batch and stage boundary (``v`` of them)."""
    if lay.pp == 1:
        return []
    _, m, _, act = _per_step(model, lay)
    msg = act / (lay.tp if lay.sp else 1)
    formula = "2 m v x (b s/cp h a" + (" / tp)" if lay.sp else ")")
    return [Comm("PP", "send_recv", ("pp",), msg, 2 * m * lay.virtual, "none", formula)]


def data_parallel_comms(
    model: ModelConfig, lay: Layout, psi: float, axes: tuple[str, ...], what: str = "dense"
) -> list[Comm]:
    """The data-parallel calls for ``psi`` parameters per GPU, reduced over ``axes``
    (DDP's all-reduce; ZeRO-1/2's reduce-scatter and all-gather; FSDP's; HSDP's).

    FSDP and HSDP gather and reduce-scatter one layer at a time: ``L/pp``
    calls of ``Psi / (L/pp)`` per pass, so each pays its own latency.
    """
    grads, params, m = psi * model.grad_bytes, psi * model.param_bytes, lay.microbatches
    tag = "" if what == "dense" else " exp"
    if lay.zero == 0:
        return [Comm("DP" + tag, "all_reduce", axes, grads, 1, "backward", "AR(Psi g) once per step")]
    if lay.zero in (1, 2):
        return [
            Comm("ZeRO" + tag, "reduce_scatter", axes, grads, 1, "backward", "RS(Psi g) once per step"),
            Comm("ZeRO" + tag, "all_gather", axes, params, 1, "forward", "AG(Psi p) once per step"),
        ]
    units = lay.layers_per_stage(model)
    name, group = ("FSDP" + tag, axes) if lay.shard is None or what != "dense" else ("HSDP", ("cp", "shard"))
    where = "" if name != "HSDP" else " in the shard group"
    out = [
        Comm(
            name,
            "all_gather",
            group,
            params / units,
            2 * m * units,
            "compute",
            f"2 m L/pp x AG(Psi p / (L/pp)){where}",
        ),
        Comm(
            name,
            "reduce_scatter",
            group,
            grads / units,
            m * units,
            "compute",
            f"m L/pp x RS(Psi g / (L/pp)){where}",
        ),
    ]
    if name == "HSDP":
        sharded = grads / (lay.cp * lay.shard)
        out.append(
            Comm(
                "HSDP",
                "all_reduce",
                ("replicate",),
                sharded,
                1,
                "backward",
                "AR(Psi g / shard) across replicas",
            )
        )
    return out


def _group_size(lay: Layout, axes: tuple[str, ...]) -> int:
    return len(lay.members(axes))
