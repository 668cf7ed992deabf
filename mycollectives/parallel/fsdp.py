"""Fully sharded data parallelism, ZeRO-3, and HSDP on a two-level mesh (chapter 5).

Each layer (a *unit*) is flattened into one vector, and each of the ``S``
ranks of a shard group keeps one ``1/S`` slice of it (Rajbhandari et al.
2020; Zhao et al. 2023). A step, per unit:

1. forward: all-gather the unit's parameters, run it, drop them;
2. backward: all-gather them again, recompute the unit's forward from the
   input saved at its boundary and run its backward;
3. reduce-scatter its gradient: each rank keeps the gradient of its slice.

Three collectives of the parameters' size where data parallelism has one
all-reduce (two of that size): ``3 (S-1)/S`` against ``2 (S-1)/S`` bytes.
*Prefetch* posts the all-gather of the next unit before the current one
computes, on a :class:`~.mesh.Stream`, so that the gather hides behind the
compute; it holds two units' parameters at once instead of one.

HSDP (hybrid sharding) puts the ranks on a two-level mesh
``{"replicate": R, "shard": S}``: parameters are sharded over the ``S``
ranks of a node (fast links) and replicated over the ``R`` nodes, and each
gradient slice is all-reduced across the replicas after its
reduce-scatter. The network then carries ``2 (R-1)/R`` of the *slice*,
``1/S`` of the model, instead of gathers of the whole model.
"""

from __future__ import annotations

import torch

from .. import api
from .comm import all_reduce_
from .mesh import Mesh, Stream
from .model import BlockConfig, Params, block, loss_fn


def flatten(p: dict, pad_to: int) -> torch.Tensor:
    """One unit's tensors end to end, zero-padded to a multiple of ``pad_to`` elements."""
    flat = torch.cat([t.detach().reshape(-1) for t in p.values()])
    pad = -flat.numel() % pad_to
    return torch.cat([flat, flat.new_zeros(pad)])


def unflatten(flat: torch.Tensor, like: dict) -> dict:
    """Views of ``flat`` shaped like the tensors of ``like``."""
    out, at = {}, 0
    for name, t in like.items():
        out[name] = flat[at : at + t.numel()].view_as(t)
        at += t.numel()
    return out


def shard_units(params: Params, rank: int, size: int) -> list[torch.Tensor]:
    """This rank's slice of every unit (layer), for a shard group of ``size``."""
    return [flatten(p, size).chunk(size)[rank].clone() for p in params]


def _gather(shard: torch.Tensor, group) -> torch.Tensor:
    full = shard.new_empty(api.get_world_size(group) * shard.numel())
    api.all_gather_into_tensor(full, shard, group=group, algorithm="ring")
    return full


def _reduce(grad: torch.Tensor, shard_group, replicate_group) -> torch.Tensor:
    out = grad.new_empty(grad.numel() // api.get_world_size(shard_group))
    api.reduce_scatter_tensor(out, grad, group=shard_group, algorithm="ring")
    if replicate_group is not None:  # HSDP: the slice is summed over the replicas too
        all_reduce_(out, replicate_group)
    return out


class Units:
    """The shards of every unit, gathered whole on a stream when asked; counts how many are alive.

    ``log`` collects ``(event, unit)`` in the order the main thread sees
    them, and ``("alive", n)`` each time a unit is gathered.
    """

    def __init__(self, shards: list[torch.Tensor], group, stream: Stream, log: list):
        self.shards, self.group, self.stream, self.log = shards, group, stream, log
        self.alive = 0

    def __len__(self) -> int:
        return len(self.shards)

    def gather(self, i: int):
        """Post unit ``i``'s all-gather; returns a future of its whole parameters."""
        self.log.append(("gather issued", i))
        self.alive += 1
        self.log.append(("alive", self.alive))
        return self.stream.submit(_gather, self.shards[i], self.group)

    def drop(self) -> None:
        """A unit's whole parameters are no longer referenced."""
        self.alive -= 1


def fsdp_forward(units: Units, like: Params, x: torch.Tensor, cfg: BlockConfig, prefetch: bool):
    """Gather, compute, drop, unit by unit; returns the output and each unit's input."""
    inputs, pending = [], units.gather(0)
    for i in range(len(units)):
        full = pending.result()
        if i + 1 < len(units) and prefetch:
            pending = units.gather(i + 1)  # in flight while unit i computes
        inputs.append(x)
        units.log.append(("compute", i))
        with torch.no_grad():
            x = block(unflatten(full, like[i]), x, cfg.heads)
        del full
        units.drop()
        if i + 1 < len(units) and not prefetch:
            pending = units.gather(i + 1)
    return x, inputs


def fsdp_backward(
    units: Units, like: Params, inputs: list, dy: torch.Tensor, cfg: BlockConfig, prefetch: bool, reduce
):
    """Gather again, recompute, backward, reduce-scatter (``reduce`` on the stream), last unit first;
    returns the futures of the gradient slices."""
    grads: list = [None] * len(units)
    pending = units.gather(len(units) - 1)
    for i in reversed(range(len(units))):
        full = pending.result().requires_grad_()
        if i > 0 and prefetch:
            pending = units.gather(i - 1)
        xi = inputs[i].detach().requires_grad_()
        units.log.append(("backward", i))
        block(unflatten(full, like[i]), xi, cfg.heads).backward(dy)
        dy = xi.grad
        grads[i] = units.stream.submit(reduce, full.grad)
        del full
        units.drop()
        if i > 0 and not prefetch:
            pending = units.gather(i - 1)
    return grads


def fsdp_step(
    shards: list[torch.Tensor],
    like: Params,
    x: torch.Tensor,
    target: torch.Tensor,
    cfg: BlockConfig,
    total: int,
    mesh: Mesh,
    prefetch: bool = True,
    log: list | None = None,
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """One step of ZeRO-3 (``mesh`` axes ``"shard"``, and ``"replicate"`` for HSDP).

    ``like`` gives the tensors' shapes. Returns this rank's output and the
    gradient of each of its slices. ``log`` collects ``(event, unit)`` in
    the order the main thread sees them, and ``("alive", n)``: how many
    units' whole parameters exist at once.
    """
    shard_group = mesh.group("shard", stream=1)
    replicate_group = mesh.group("replicate", stream=1) if mesh.shape.get("replicate", 1) > 1 else None
    with Stream() as stream:
        units = Units(shards, shard_group, stream, log if log is not None else [])
        y, inputs = fsdp_forward(units, like, x, cfg, prefetch)
        y.requires_grad_()
        loss_fn(y, target, total).backward()
        grads = fsdp_backward(
            units, like, inputs, y.grad, cfg, prefetch, lambda g: _reduce(g, shard_group, replicate_group)
        )
        grad_shards = [g.result() for g in grads]
    return y.detach(), grad_shards
