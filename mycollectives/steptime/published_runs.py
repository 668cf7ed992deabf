"""Published training runs the step-time calculator is checked against (framework-level measurements).

These are a category of their own, apart from the nccl-tests data of
``mycollectives/sim/published.json``: whole training steps measured by a
framework (torchtitan here), in tokens per second per GPU. None of them is
used to fit anything; the calculator's default compute rate is fitted on
llm-foundry's runs (:mod:`.sustained`), and these are held out of it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..memory.vendor import A100, H100, GPUSpec
from ..topology import cluster
from .config import LLAMA3_8B, ModelConfig
from .layout import Layout
from .step import StepReport, step_time


@dataclass(frozen=True)
class TrainingRun:
    """One published run: what ran, on what, and the tokens/s per GPU its source reports."""

    id: str
    source: str  # references.bib key
    model: ModelConfig
    node: str  # the preset the cluster is built from
    nodes: int
    layout: Layout
    tokens_per_gpu_s: float
    what_was_run: str
    assumed: tuple[str, ...] = ()

    @property
    def gpu(self) -> GPUSpec:
        return {"dgx_a100": A100, "dgx_h100": H100}[self.node]

    def predict(self) -> StepReport:
        """The calculator's step for this run, with its default flags."""
        return step_time(self.model, self.layout, cluster(self.node, min(self.nodes, 2)), gpu=self.gpu)


def _fsdp(gpus: int, local_batch: int) -> Layout:
    return Layout(dp=gpus, zero=3, micro_batch=local_batch, recompute="selective")


RUNS = (
    TrainingRun(
        "torchtitan-8b-128xh100", "torchtitan2024h100bench", LLAMA3_8B, "dgx_h100", 16, _fsdp(128, 2), 5605,
        "Llama 3.1 8B, FSDP on 128 H100, local batch 2 of 8192 tokens, selective activation checkpointing, eager",
        ("the H100s are 96 GB HBM2e parts at 500 W, the preset's are SXM5 at 700 W",),
    ),
    TrainingRun(
        "torchtitan-8b-8xh100", "torchtitan2024h100bench", LLAMA3_8B, "dgx_h100", 1, _fsdp(8, 2), 5762,
        "Llama 3.1 8B, FSDP on 8 H100, local batch 2 of 8192 tokens, selective activation checkpointing, eager",
        ("the H100s are 96 GB HBM2e parts at 500 W, the preset's are SXM5 at 700 W",),
    ),
    TrainingRun(
        "torchtitan-8b-64xa100", "torchtitan2024performance", LLAMA3_8B, "dgx_a100", 8, _fsdp(64, 1), 2973,
        "Llama 3 8B, FSDP2 on 64 A100 80GB, local batch 1, selective op activation checkpointing",
        ("sequences of 8192 tokens (torchtitan's Llama 3 8B configuration; the table does not say)",),
    ),
)  # fmt: skip
