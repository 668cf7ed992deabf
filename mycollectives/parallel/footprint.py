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
the micro-batches in flight: ``pp`` of them on the first stage under 1F1B.
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
    tokens = tokens_per_rank(model, lay)
    per_layer = activation_bytes_per_token(model, lay) * tokens
    if lay.recompute == "full":
        kept = model.act_bytes * model.hidden / (lay.tp if lay.sp else 1) * tokens * per_stage
        acts_one = kept + per_layer
    else:
        acts_one = per_layer * per_stage
    in_flight = min(lay.microbatches, lay.pp) if lay.pp > 1 else 1
    out = {
        "parameters": pd + pe + gathered,
        "gradients": gd + ge,
        "optimizer": od + oe,
        "activations": acts_one * in_flight,
    }
    out["total"] = sum(out.values())
    return out
