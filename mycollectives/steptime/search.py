"""Search the layouts of a model on a cluster with the calculator (chapter 5, exercises).

:func:`layouts` enumerates the layouts that use exactly ``gpus`` GPUs and
keep the global batch at ``sequences`` sequences (``dp`` ranks times ``m``
micro-batches of one sequence); :func:`search` prices each with
:func:`~.calculator.step_time`, drops those that do not fit in the GPU's
memory, and returns the rest fastest first.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..topology import Topology
from .config import ModelConfig
from .layout import Layout
from .step import StepReport, step_time

POWERS = (1, 2, 4, 8, 16, 32, 64, 128)


def layouts(
    model: ModelConfig,
    gpus: int,
    sequences: int,
    *,
    tp=(1, 2, 4, 8),
    cp=(1,),
    pp=(1, 2, 4, 8, 16),
    ep=(1,),
    zero=(1, 3),
    recompute=("selective", "full"),
    virtual=(1,),
) -> Iterator[Layout]:
    """Every valid layout of the grid (sequence parallelism on whenever ``tp > 1``)."""
    for t in tp:
        for c in cp:
            for p in pp:
                if gpus % (t * c * p):
                    continue
                d = gpus // (t * c * p)
                if sequences % d:
                    continue
                for e in ep:
                    for z in zero:
                        for r in recompute:
                            for v in virtual:
                                try:
                                    lay = Layout(
                                        tp=t,
                                        sp=t > 1,
                                        cp=c,
                                        pp=p,
                                        dp=d,
                                        ep=e,
                                        zero=z,
                                        microbatches=sequences // d,
                                        virtual=v,
                                        recompute=r,
                                    )
                                    lay.check(model)
                                except ValueError:
                                    continue
                                yield lay


def search(
    model: ModelConfig, gpus: int, sequences: int, topology: Topology, step_kw: dict | None = None, **grid
) -> list[StepReport]:
    """The layouts of :func:`layouts` that fit in memory, fastest step first."""
    out = []
    for lay in layouts(model, gpus, sequences, **grid):
        r = step_time(model, lay, topology, **(step_kw or {}))
        if r.memory["total"] <= r.gpu.hbm_bytes:
            out.append(r)
    return sorted(out, key=lambda r: r.step)
