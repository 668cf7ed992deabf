"""Lab 5: fully sharded data parallelism (ZeRO-3) from reduce-scatter and all-gather.

    torchrun --standalone --nproc-per-node 8 labs/scripts/fsdp.py --out fsdp.json
    python labs/scripts/fsdp.py --virtual dgx_h100:2 --out fsdp.json   # 16 virtual GPUs, no torchrun

Every parameter of the model lives in one flat vector, padded to a multiple of
the world size and cut into ``p`` shards; rank ``r`` keeps shard ``r`` of the
parameters, of their gradients and of Adam's two moments, nothing more.
A step:

1. ``mc.all_gather_into_tensor``: the full parameters, for forward and backward;
2. ``mc.reduce_scatter_tensor``: each rank receives the sum of its shard of
   the gradients, and divides by ``p``;
3. Adam updates the local shard only; the full parameters are dropped.

The loss curve must equal DDP's (torch DDP with the same Adam) step by step.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.func import functional_call
from torch.nn.parallel import DistributedDataParallel

import mycollectives as mc
from labs.scripts.common import (
    Env,
    launch,
    log,
    make_model,
    native_group,
    parser,
    save,
    setup,
    sync,
    teardown,
    time_label,
    timed,
)

LR = 1e-3


def batch(step: int, per_rank: int, width: int, env: Env) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(per_rank * env.world_size, width, generator=g)
    y = x[:, :1].sin()
    return x.chunk(env.world_size)[env.rank].to(env.device), y.chunk(env.world_size)[env.rank].to(env.device)


class ShardedModel:
    """ZeRO-3 over the default group: 1/p of parameters, gradients and Adam state per rank."""

    def __init__(self, module: nn.Module, env: Env, compute_dtype: torch.dtype = torch.float32):
        self.module, self.env, self.dtype = module, env, compute_dtype
        self.shapes = {name: p.shape for name, p in module.named_parameters()}
        flat = torch.cat([p.detach().reshape(-1) for p in module.parameters()])
        self.numel = flat.numel()
        self.shard_numel = math.ceil(self.numel / env.world_size)
        padded = torch.zeros(self.shard_numel * env.world_size, device=env.device)
        padded[: self.numel] = flat
        # fp32 master shard, its gradient and Adam's moments: the persistent state of this rank
        self.shard = nn.Parameter(padded.chunk(env.world_size)[env.rank].clone())
        self.opt = torch.optim.Adam([self.shard], lr=LR)
        self.grad = torch.zeros(
            self.shard_numel, dtype=compute_dtype, device=env.device
        )  # reduce-scatter lands here
        # in mixed precision, the low-precision copy of the shard that all-gathers send
        self.compute = None if compute_dtype == torch.float32 else self.shard.detach().to(compute_dtype)
        module.to("meta")  # the unsharded copy is gone; only shapes remain

    def full_parameters(self) -> torch.Tensor:
        """All-gather the shards into the full flat parameter vector (in ``compute_dtype``)."""
        full = torch.empty(self.shard_numel * self.env.world_size, dtype=self.dtype, device=self.env.device)
        mc.all_gather_into_tensor(full, self.shard.detach() if self.compute is None else self.compute)
        return full

    def step(self, x: torch.Tensor, y: torch.Tensor) -> float:
        full = self.full_parameters().requires_grad_()
        params, offset = {}, 0
        for name, shape in self.shapes.items():
            n = math.prod(shape)
            params[name] = full[offset : offset + n].view(shape)
            offset += n
        out = functional_call(self.module, params, (x.to(self.dtype),))
        loss = nn.functional.mse_loss(out.float(), y)
        loss.backward()
        mc.reduce_scatter_tensor(self.grad, full.grad)  # sum of this rank's shard over all ranks
        self.grad.div_(self.env.world_size)  # the mean, as DDP
        self.shard.grad = self.grad if self.compute is None else self.grad.float()  # fp32 for Adam
        self.opt.step()
        self.shard.grad = None
        if self.compute is not None:
            self.compute.copy_(self.shard.detach())
        return loss.item()

    def state_bytes(self) -> dict[str, int]:
        """Bytes this rank keeps between steps, measured on the tensors themselves."""
        adam = sum(t.numel() * t.element_size() for t in self.opt.state[self.shard].values() if t.dim())
        out = dict(
            parameters=self.shard.numel() * self.shard.element_size(),
            gradients=self.grad.numel() * self.grad.element_size(),
            optimizer=adam,
        )
        if self.compute is not None:
            out[f"{self.dtype} parameters"] = self.compute.numel() * self.compute.element_size()
        return out


def global_mean(x: float, env: Env) -> float:
    t = torch.tensor([x], dtype=torch.float64, device=env.device)
    mc.all_reduce(t)
    return float(t) / env.world_size


def train_ddp(width: int, depth: int, env: Env, data: list) -> tuple:
    """DDP with Adam, every rank holding everything: (model, optimizer, losses, state bytes, peak)."""
    ddp = DistributedDataParallel(make_model(width, depth, env), process_group=native_group())
    opt = torch.optim.Adam(ddp.parameters(), lr=LR)
    if env.gpu:
        torch.cuda.reset_peak_memory_stats(env.device)
    losses = []
    for x, y in data:
        loss = nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=False)
        losses.append(global_mean(loss.item(), env))
    state = dict(
        parameters=sum(p.numel() * p.element_size() for p in ddp.parameters()),
        gradients=sum(p.grad.numel() * p.grad.element_size() for p in ddp.parameters()),
        optimizer=sum(
            t.numel() * t.element_size() for s in opt.state.values() for t in s.values() if t.dim()
        ),
    )
    peak = torch.cuda.max_memory_allocated(env.device) if env.gpu else None
    return ddp, opt, losses, state, peak


def train_sharded(width: int, depth: int, env: Env, data: list, dtype: torch.dtype = torch.float32) -> tuple:
    """ZeRO-3 from the package's collectives, same model, data and optimizer: (model, losses, peak)."""
    model = ShardedModel(make_model(width, depth, env), env, dtype)
    if env.gpu:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(env.device)
    losses = [global_mean(model.step(x, y), env) for x, y in data]
    return model, losses, torch.cuda.max_memory_allocated(env.device) if env.gpu else None


def report_state(env: Env, n_params: int, states: dict[str, dict[str, int]]) -> None:
    """Log each model's bytes per rank and check that sharding kept all of it, split ``world_size`` ways."""
    for name, st in states.items():
        total = sum(st.values())
        log(
            env,
            f"{name:5s} state per rank: {total / 2**20:8.2f} MiB = {total / n_params:5.2f} bytes/parameter",
        )
        log(env, "      " + ", ".join(f"{k} {v / 2**20:.2f} MiB" for k, v in st.items()))
    fsdp, ddp = sum(states["FSDP"].values()), sum(states["DDP"].values())
    assert fsdp * env.world_size >= ddp, "sharding lost some state"
    assert fsdp <= ddp / env.world_size + 16 * env.world_size


def main() -> None:
    args = parser(__doc__)
    args.add_argument("--width", type=int, default=None)
    args.add_argument("--depth", type=int, default=4)
    args.add_argument("--steps", type=int, default=None)
    a = args.parse_args()
    env = setup()
    width = a.width or (4096 if env.gpu else 256)
    steps = a.steps or (20 if env.gpu else 8)
    per_rank = 32 if env.gpu else 8
    data = [batch(s, per_rank, width, env) for s in range(steps)]

    ddp, opt, ddp_loss, ddp_state, ddp_peak = train_ddp(width, a.depth, env, data)
    n_params = sum(p.numel() for p in ddp.parameters())
    fsdp, fsdp_loss, fsdp_peak = train_sharded(width, a.depth, env, data)
    torch.testing.assert_close(torch.tensor(fsdp_loss), torch.tensor(ddp_loss), rtol=1e-4, atol=1e-6)
    full = fsdp.full_parameters()[: fsdp.numel]
    torch.testing.assert_close(
        full, torch.cat([p.detach().reshape(-1) for p in ddp.parameters()]), rtol=1e-4, atol=1e-5
    )
    log(env, f"{n_params / 1e6:.2f} M parameters; after {steps} Adam steps")
    log(env, "the loss curve and the weights equal DDP's")
    fsdp_state = fsdp.state_bytes()
    report_state(env, n_params, {"DDP": ddp_state, "FSDP": fsdp_state})

    # mixed precision: bf16 gathers and gradients, fp32 master shard and Adam
    mixed, mixed_loss, _ = train_sharded(width, a.depth, env, data, torch.bfloat16)
    mixed_state = mixed.state_bytes()
    per_param = sum(mixed_state.values()) * env.world_size / n_params
    assert 16 <= per_param < 16 * (1 + env.world_size / n_params) + 1e-9, (
        f"mixed precision: {per_param} B/param"
    )
    log(env, f"bf16 ZeRO-3 loss after {steps} steps {mixed_loss[-1]:.4f} (fp32: {fsdp_loss[-1]:.4f})")

    times = step_times(env, ddp, opt, fsdp, data[0])
    save(
        env,
        a.out,
        dict(
            n_params=n_params,
            steps=steps,
            ddp_loss=ddp_loss,
            fsdp_loss=fsdp_loss,
            mixed_loss=mixed_loss,
            ddp_state=ddp_state,
            fsdp_state=fsdp_state,
            mixed_state=mixed_state,
            ddp_peak=ddp_peak,
            fsdp_peak=fsdp_peak,
            times=times,
        ),
    )
    teardown()


def step_times(env: Env, ddp, opt, fsdp, batch_xy) -> dict[str, float]:
    """Seconds per step of DDP and of ZeRO-3 on one batch, logged."""
    x, y = batch_xy

    def ddp_step():
        nn.functional.mse_loss(ddp(x), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=False)

    reps = 10 if env.gpu else 3
    times = {"DDP": timed(env, ddp_step, reps), "ZeRO-3 fp32": timed(env, lambda: fsdp.step(x, y), reps)}
    sync(env)
    log(env, f"step times, {time_label(env)}")
    for k, v in times.items():
        log(env, f"{k:12s} {v * 1e3:8.2f} ms/step")
    return times


if __name__ == "__main__":
    launch(main)
