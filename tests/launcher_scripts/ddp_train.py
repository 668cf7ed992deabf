"""DDP training of a small MLP: every rank trains on its slice of one global batch per step;
rank 0 writes the mean loss of each step to the JSON file named by --out.

    torchrun --nproc-per-node 4 ddp_train.py --out losses.json
"""

import argparse
import json
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

WIDTH, BATCH = 16, 32


def model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.Tanh(), nn.Linear(WIDTH, 1))


def batch(step):
    g = torch.Generator().manual_seed(100 + step)
    return torch.randn(BATCH, WIDTH, generator=g), torch.randn(BATCH, 1, generator=g)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=3)
    a = p.parse_args()
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    net = DDP(model().cuda(), device_ids=[local_rank])
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    losses = []
    for step in range(a.steps):
        x, y = batch(step)
        x, y = x.chunk(world)[rank].to(f"cuda:{local_rank}"), y.chunk(world)[rank].cuda()
        loss = nn.functional.mse_loss(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean, op=dist.ReduceOp.AVG)
        losses.append(mean.item())
    if rank == 0:
        with open(a.out, "w") as f:
            json.dump({"losses": losses, "world": world}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
