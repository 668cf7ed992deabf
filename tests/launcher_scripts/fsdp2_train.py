"""FSDP2 (fully_shard) training of a small MLP on a device mesh of every rank; rank 0 writes
the mean loss of each step to --out.

    torchrun --nproc-per-node 4 fsdp2_train.py --out losses.json
"""

import argparse
import json
import os

import torch
import torch.distributed as dist
from ddp_train import WIDTH, batch, model
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=3)
    a = p.parse_args()
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl")
    world, rank = int(os.environ["WORLD_SIZE"]), int(os.environ["RANK"])
    mesh = init_device_mesh("cuda", (world,))
    net = model()
    for layer in net:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(net, mesh=mesh)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    losses = []
    for step in range(a.steps):
        x, y = batch(step)
        x, y = x.chunk(world)[rank].cuda(), y.chunk(world)[rank].cuda()
        loss = nn.functional.mse_loss(net(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        mean = loss.detach().clone()
        dist.all_reduce(mean, op=dist.ReduceOp.AVG)
        losses.append(mean.item())
    if rank == 0:
        with open(a.out, "w") as f:
            json.dump({"losses": losses, "width": WIDTH}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
