"""The script benchmarks/virtual_launcher.py launches: DDP of a small MLP, as under torchrun.

torchrun --nproc-per-node 8 benchmarks/virtual_launcher_ddp.py --steps 10
python -m mycollectives.virtual --nnodes 2 benchmarks/virtual_launcher_ddp.py --steps 10
"""

import argparse
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--width", type=int, default=256)
    a = p.parse_args()
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(a.width, a.width), nn.ReLU(), nn.Linear(a.width, a.width), nn.ReLU(), nn.Linear(a.width, 1)
    )
    model = DDP(model.to(local_rank), device_ids=[local_rank])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(dist.get_rank())
    for _ in range(a.steps):
        x, y = torch.randn(32, a.width, generator=g).cuda(), torch.randn(32, 1, generator=g).cuda()
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    dist.destroy_process_group()
