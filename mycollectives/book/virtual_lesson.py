"""The virtual cluster's chapter: a bucketed data-parallel step, its timeline, and the exercise's check.

:func:`bucketed_step` is the shape of a DDP step (chapter 5): the backward
pass computes the gradients in ``buckets`` pieces, and each bucket's
all-reduce starts on the communication stream as soon as its piece is
done, while the next piece computes; the step waits for every bucket at
the end. :func:`plot_timeline` draws what each rank's compute and stream
did; :func:`check_step_time` checks the exercise of the chapter.
"""

from __future__ import annotations

import torch

import mycollectives as mc
from mycollectives import virtual

from .exercises.answers import exercise, expect, need, passed


def bucketed_step(rank: int, buckets: int, nbytes: int, seconds: float, overlap: bool = True) -> float:
    """One step: ``buckets`` pieces of backward of ``seconds`` each, a ``nbytes`` all-reduce (ring)
    per bucket, async on the stream if ``overlap``; returns this rank's step time (virtual seconds)."""
    grads = [torch.full((nbytes // 4,), float(rank)) for _ in range(buckets)]
    t0 = virtual.clock()
    works = []
    for g in grads:
        virtual.compute(seconds=seconds)  # this bucket's share of the backward pass
        work = mc.all_reduce(g, algorithm="ring", async_op=overlap)
        works.append(work)
    for w in works:
        if w is not None:
            w.wait()
    return virtual.clock() - t0


def plot_timeline(result, ax, ranks=None, t_max: float | None = None) -> None:
    """Each rank's compute (below) and communication (above) as bars along virtual time, in ms."""
    ranks = list(range(len(result.results))) if ranks is None else list(ranks)
    colors = {"compute": "tab:blue", "stream": "tab:orange", "comm": "tab:orange"}
    for row, r in enumerate(ranks):
        for rank, lane, start, end in result.spans:
            if rank != r:
                continue
            y = row + (0.0 if lane == "compute" else 0.42)
            ax.broken_barh(
                [(start * 1e3, (end - start) * 1e3)],
                (y, 0.38),
                color=colors[lane],
                edgecolor="white",
                linewidth=0.8,
            )
    ax.set_yticks([i + 0.4 for i in range(len(ranks))], [f"rank {r}" for r in ranks])
    ax.set_xlabel("virtual time (ms)")
    ax.set_xlim(0, (t_max or result.elapsed) * 1e3)
    handles = [
        ax.bar(0, 0, color=c, label=n) for n, c in (("compute", "tab:blue"), ("all-reduce", "tab:orange"))
    ]
    # above the axes, not over the bars
    ax.legend(handles=handles, loc="lower left", bbox_to_anchor=(0, 1.12), ncol=2, fontsize=10, frameon=False)


@exercise
def check_step_time(answer, buckets: int = 4, nbytes: int = 16 << 20, seconds: float = 1e-4) -> None:
    """The exercise: the overlapped step's time on one DGX H100, predicted from one bucket's all-reduce time."""
    need(answer, "step_time, in seconds")
    got = virtual.run(
        bucketed_step,
        "dgx_h100",
        1,
        (buckets, nbytes, seconds, True),
        timeout=300,
        compute=virtual.NETWORK_ONLY,
    )
    want = max(got.results)
    passed(
        expect(
            answer,
            want,
            "the overlapped step time (s)",
            rel=0.02,
            hint="a bucket's all-reduce starts when its piece of backward is done and the one before it has "
            "finished on the stream",
        )
    )
