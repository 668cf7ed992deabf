"""Pipeline parallelism (chapter 5): layers cut into stages, activations passed by send/recv.

Stage ``s`` of ``p`` holds layers ``s L/p .. (s+1) L/p - 1``. A batch is cut
into ``m`` micro-batches; each travels down the stages (a send of its
activation ``[s, b/m, d]`` per stage boundary) and its gradient travels back
up (a send of the same size). GPipe's schedule (Huang et al. 2019) runs all
forwards, then all backwards; the stages wait for one another at the start
and the end of a step, idle for a fraction ``(p-1)/(m+p-1)`` of it: the
*bubble*, which :func:`gpipe_timeline` draws and lab 6 measures, with 1F1B
beside it.
"""

from __future__ import annotations

import torch

from .. import api
from .model import BlockConfig, Params, block, loss_fn


def stage_layers(cfg: BlockConfig, stage: int, stages: int) -> range:
    if cfg.layers % stages:
        raise ValueError(f"{cfg.layers} layers do not split into {stages} pipeline stages")
    per = cfg.layers // stages
    return range(stage * per, (stage + 1) * per)


def pp_step(params: Params, xs: list[torch.Tensor], targets: list[torch.Tensor], cfg, total: int, group=None):
    """GPipe on ``group``: this stage's ``params``; ``xs``/``targets`` are the micro-batches
    (read on the first/last stage). Returns the last stage's outputs."""
    s, p = api.get_rank(group), api.get_world_size(group)
    first, last = s == 0, s == p - 1
    shape = xs[0].shape
    inputs, outputs, results = [], [], []
    for i in range(len(xs)):  # all forwards
        x = xs[i].clone() if first else torch.empty(shape, dtype=xs[0].dtype)
        if not first:
            api.recv(x, group=group, group_src=s - 1)
        x.requires_grad_(not first)
        y = x
        for p_ in params:
            y = block(p_, y, cfg.heads)
        inputs.append(x)
        outputs.append(y)
        if last:
            results.append(y.detach())
        else:
            api.send(y.detach().contiguous(), group=group, group_dst=s + 1)
    for i in reversed(range(len(xs))):  # all backwards
        if last:
            loss_fn(outputs[i], targets[i], total).backward()
        else:
            grad = torch.empty(shape, dtype=xs[0].dtype)
            api.recv(grad, group=group, group_src=s + 1)
            outputs[i].backward(grad)
        if not first:
            api.send(inputs[i].grad.contiguous(), group=group, group_dst=s - 1)
    return results


def gpipe_timeline(
    p: int, m: int, t_f: float = 1.0, t_b: float = 2.0
) -> list[list[tuple[str, int, float, float]]]:
    """Per stage, ``(kind, micro-batch, start, end)`` of GPipe with free communication.

    >>> rows = gpipe_timeline(4, 8)
    >>> end = max(e for row in rows for *_, e in row)
    >>> busy = sum(e - b for row in rows for _, _, b, e in row) / (4 * end)
    >>> round(1 - busy, 4) == round(3 / (8 + 3), 4)  # the bubble (p-1)/(m+p-1)
    True
    """
    done: dict[tuple[str, int, int], float] = {}
    rows: list[list] = [[] for _ in range(p)]
    free = [0.0] * p
    for i in range(m):
        for s in range(p):
            start = max(free[s], done.get(("F", i, s - 1), 0.0))
            done[("F", i, s)] = free[s] = start + t_f
            rows[s].append(("F", i, start, start + t_f))
    for i in reversed(range(m)):
        for s in reversed(range(p)):
            start = max(free[s], done.get(("B", i, s + 1), done[("F", m - 1, p - 1)] if s == p - 1 else 0.0))
            done[("B", i, s)] = free[s] = start + t_b
            rows[s].append(("B", i, start, start + t_b))
    return rows
