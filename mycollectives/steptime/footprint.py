"""Memory per GPU of a layout (chapter 5): model states and activations.

Model states (Rajbhandari et al. 2020): per parameter ``param_bytes`` of
weights, ``grad_bytes`` of gradient and ``optim_bytes`` of optimizer state,
each divided by the ``D`` data-parallel ranks that shard it (ZeRO-1: the
optimizer state; ZeRO-2: and the gradients; ZeRO-3: and the weights, plus
the two units whose whole weights exist at once under prefetch).

Activations, per layer and token, in ``act_bytes`` each, for this Llama-like
block with FlashAttention (no ``s x s`` scores are ever stored, which is
what Korthikanti et al.'s selective recomputation buys):

- the two norms' inputs (the residual stream) and their outputs, which are
  the column-parallel matmuls' inputs: ``4 h``, divided by ``tp`` only under
  sequence parallelism (the outputs re-gathered in the backward pass);
- ``Q`` and the attention output, ``2 h / tp``; ``K`` and ``V``, ``2 kv / tp``;
- the MLP's gate and up projections and their product, ``3 ffn / tp``
  (times ``top_k`` for a mixture of experts).

Full recomputation keeps only each layer's input (``h``, over ``tp`` with
sequence parallelism) and one layer's activations at a time. A stage holds
the micro-batches in flight (:func:`in_flight`): under 1F1B, stage ``s`` of
``pp`` holds ``pp - s`` of them; under the interleaved schedule of ``v``
chunks, ``2 (pp - s - 1) + (v - 1) pp + 1`` chunks of ``1/v`` of its layers
(Megatron-LM's warm-up count, Narayanan et al. 2021). The activations of the
stage where layers times micro-batches in flight is largest are counted
(:meth:`~.layout.Layout.stage_layers` lightens the first and last stages
when ``pp`` does not divide the layers), beside the model states of the
stage with the most layers.
"""

from __future__ import annotations

from ..memory.vendor import GPUSpec
from .config import ModelConfig
from .layout import Layout
from .traffic import kv_width, params_per_gpu, tokens_per_rank


def activation_bytes_per_token(model: ModelConfig, lay: Layout) -> float:
    """Bytes one layer keeps per token on one GPU for the backward pass (no recomputation)."""
    h, t = model.hidden, lay.tp
    replicated = 4 * h / (t if lay.sp else 1)
    attention = 2 * h / t + 2 * kv_width(model, lay)
    mlp = 3 * model.ffn / t * (model.top_k if model.moe else 1)
    return model.act_bytes * (replicated + attention + mlp)


def in_flight(lay: Layout, stage: int) -> float:
    """Micro-batches whose activations stage ``stage`` holds at its peak, in whole-stage units."""
    if lay.pp == 1:
        return 1.0
    if lay.virtual == 1:
        return float(min(lay.microbatches, lay.pp - stage))
    chunks = 2 * (lay.pp - stage - 1) + (lay.virtual - 1) * lay.pp + 1
    return min(lay.microbatches * lay.virtual, chunks) / lay.virtual


def activation_bytes(model: ModelConfig, lay: Layout) -> float:
    """Activation bytes on the pipeline stage that holds the most (see the module docstring)."""
    tokens = tokens_per_rank(model, lay)
    per_layer = activation_bytes_per_token(model, lay) * tokens
    worst = 0.0
    for stage, layers in enumerate(lay.stage_layers(model)):
        if lay.recompute == "full":  # each layer's input, for every micro-batch in flight, + one layer
            kept = model.act_bytes * model.hidden / (lay.tp if lay.sp else 1) * tokens * layers
            acts = kept * in_flight(lay, stage) + per_layer
        else:
            acts = per_layer * layers * in_flight(lay, stage)
        worst = max(worst, acts)
    return worst


def memory_per_gpu(model: ModelConfig, lay: Layout, gpu: GPUSpec) -> dict[str, float]:
    """Bytes per GPU: parameters, gradients, optimizer state, activations, and their total."""
    dense, expert = params_per_gpu(model, lay)
    d_dense = lay.cp * (lay.shard or lay.dp)
    d_expert = lay.cp * (lay.dp // lay.ep)
    z = lay.zero

    def states(psi: float, d: int) -> tuple[float, float, float]:
        p = psi * model.param_bytes / (d if z >= 3 else 1)
        g = psi * model.grad_bytes / (d if z >= 2 else 1)
        o = psi * model.optim_bytes / (d if z >= 1 else 1)
        return p, g, o

    pd, gd, od = states(dense, d_dense)
    pe, ge, oe = states(expert, d_expert)
    per_stage = lay.layers_per_stage(model)
    gathered = 0.0
    if z == 3:  # two units' whole weights at once (prefetch)
        gathered = 2 * (dense + expert) / per_stage * model.param_bytes
    out = {
        "parameters": pd + pe + gathered,
        "gradients": gd + ge,
        "optimizer": od + oe,
        "activations": activation_bytes(model, lay),
    }
    out["total"] = sum(out.values())
    return out
