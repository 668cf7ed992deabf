"""The compute rate the step-time calculator assumes when it is given none: a sustained MFU, fitted.

A GPU does not train at its datasheet's peak. The default is the MFU that
published FSDP training runs on H100s sustained: the median of the 52 rows
of llm-foundry's "H100 80GB BF16" table (MPT models of 760M to 70B
parameters, sequences of 512 to 65,536 tokens, 8 to 64 GPUs, FSDP
``FULL_SHARD``; ``mosaicml_llmfoundry_bench``), 39.8 %. It is *fitted* on
those rows and on nothing else: torchtitan's runs, which the book checks the
calculator against, are held out of it.

llm-foundry counts a token's FLOPs as ``6 N + 12 L s h`` (every parameter,
and full, non-causal attention), where the calculator counts ``6`` per
parameter that multiplies plus causal attention
(:meth:`~.config.ModelConfig.flops_per_token`). The rate is applied in the
count it was measured in: a step's compute is its tokens times
:func:`source_flops_per_token`, over the MFU times the GPU's bf16 peak.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from ..memory.vendor import GPUSpec
from .config import ModelConfig

# The MFU column (%) of llm-foundry's "H100 80GB BF16" table, in its order (mosaicml_llmfoundry_bench).
LLM_FOUNDRY_H100_BF16_MFU = (
    42.57, 36.15, 29.92, 35.86, 43.92, 43.07, 38.11, 38.76,  # 70B, 30B
    31.68, 35.55, 41.6, 39.86, 39.95, 39.58, 39.79, 44.27,  # 13B
    28.59, 30.94, 37.14, 40.42, 46.44, 42.83,  # 7B
    26.81, 28.84, 36.34, 40.31, 42.31, 40.8, 41.7, 43.73, 46.2, 46.32,  # 3B
    26.34, 33.54, 35.22, 37.73, 40.26, 40.85, 41.52, 42.36, 41.82, 41.95, 43.21,  # 1B
    31.84, 33.57, 34.84, 35.83, 37.57, 37.89, 34.9, 39.76, 40.42,  # 760M
)  # fmt: skip


def source_flops_per_token(model: ModelConfig) -> float:
    """FLOPs per token as llm-foundry counts them for its MFU: ``6 N + 12 L s h``. Its table has
    dense models only, where ``N`` is every parameter; for a mixture of experts ``N`` is the
    parameters a token multiplies (its ``top_k`` experts), as MFU is quoted for such models."""
    return 6 * model.active_params + 12 * model.layers * model.seq * model.hidden


@dataclass(frozen=True)
class Sustained:
    """A sustained fraction of the GPU's bf16 peak, with where it comes from."""

    mfu: float  # of the bf16 dense peak, FLOPs counted as source_flops_per_token counts them
    source: str

    def __post_init__(self) -> None:
        v = self.mfu
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v <= 1:
            raise ValueError(f"mfu: expected an efficiency in (0, 1], got {v!r}")

    def rate(self, model: ModelConfig, gpu: GPUSpec) -> float:
        """FLOP/s in the calculator's own count (``model.flops_per_token()``) that this MFU gives."""
        return self.mfu * gpu.peak_flops["bf16"] * model.flops_per_token() / source_flops_per_token(model)

    def label(self) -> str:
        return f"at {100 * self.mfu:.1f} % MFU, assumed: {self.source}"


SUSTAINED = Sustained(
    statistics.median(LLM_FOUNDRY_H100_BF16_MFU) / 100,
    "llm-foundry H100 median, fitted; torchtitan held out",
)
