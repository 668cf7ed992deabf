"""Data parallelism (chapter 5): the same model on every rank, the gradients all-reduced.

Each of ``p`` ranks runs the whole model on its share of the batch; one
all-reduce of every gradient makes them all equal to the gradient of the
whole batch (the loss divides by the global element count, so *summing* is
averaging). That is ``2 (p-1)/p`` times the model's gradient bytes per rank
and step, whatever the batch.

Sending each gradient on its own would pay one collective's latency per
tensor; DDP packs them into *buckets* of about 25 MiB, in the order the
backward pass produces them (last layer first), and all-reduces a bucket as
soon as its last gradient exists, while the backward pass goes on with the
layers below (Li et al. 2020). ``overlap=True`` does that here: a hook on
each parameter puts a full bucket's all-reduce on a :class:`~.mesh.Stream`.
"""

from __future__ import annotations

import torch

from ..transport import resolve_group
from .comm import all_reduce_
from .mesh import STREAM_TAGS, Stream
from .model import BlockConfig, Params, forward, loss_fn


def bucket_plan(tensors: list[torch.Tensor], bucket_bytes: int) -> list[list[int]]:
    """Indices of ``tensors`` in buckets of at most ``bucket_bytes`` (a larger tensor
    gets a bucket of its own), filled in reverse order, as the backward pass produces them.

    >>> ts = [torch.zeros(n) for n in (4, 4, 8, 2)]  # 16, 16, 32 and 8 bytes
    >>> bucket_plan(ts, 32)
    [[3], [2], [1, 0]]
    """
    if bucket_bytes <= 0:
        raise ValueError(f"bucket_bytes must be positive, got {bucket_bytes}")
    plan: list[list[int]] = []
    size = 0
    for i in reversed(range(len(tensors))):
        nbytes = tensors[i].numel() * tensors[i].element_size()
        if not plan or size + nbytes > bucket_bytes:
            plan.append([])
            size = 0
        plan[-1].append(i)
        size += nbytes
    return plan


def reduce_bucket(grads: list[torch.Tensor], group) -> None:
    """One all-reduce for a bucket of gradients: pack, sum, unpack in place."""
    flat = torch.cat([g.reshape(-1) for g in grads])
    all_reduce_(flat, group)
    at = 0
    for g in grads:
        g.copy_(flat[at : at + g.numel()].view_as(g))
        at += g.numel()


def dp_step(
    params: Params,
    x: torch.Tensor,
    target: torch.Tensor,
    cfg: BlockConfig,
    total: int,
    group=None,
    bucket_bytes: int = 25 << 20,
    overlap: bool = False,
) -> torch.Tensor:
    """Forward and backward on this rank's ``x``, then sum the gradients over ``group``.

    ``params`` are leaves (:func:`~.model.leaves`); their ``.grad`` hold the
    whole batch's gradient afterwards. Returns this rank's output.
    """
    flat = [t for p in params for t in p.values()]
    plan = bucket_plan(flat, bucket_bytes)
    if not overlap:
        y = forward(params, x, cfg)
        loss_fn(y, target, total).backward()
        for bucket in plan:
            reduce_bucket([flat[i].grad for i in bucket], group)
        return y
    parent = resolve_group(group)
    comm = parent.subgroup(range(parent.world_size), tag=STREAM_TAGS)  # the stream's own messages
    waiting = [len(b) for b in plan]
    where = {i: k for k, b in enumerate(plan) for i in b}
    with Stream() as stream:

        def ready(k: int) -> None:
            waiting[k] -= 1
            if waiting[k] == 0:  # the bucket's last gradient: send it while backward goes on
                stream.submit(reduce_bucket, [flat[i].grad for i in plan[k]], comm)

        hooks = [
            t.register_post_accumulate_grad_hook(lambda _, k=where[i]: ready(k)) for i, t in enumerate(flat)
        ]
        try:
            y = forward(params, x, cfg)
            loss_fn(y, target, total).backward()
        finally:
            for h in hooks:
                h.remove()
    return y
