"""A first DDP program in the shape PyTorch's DDP tutorial teaches for torchrun (our own version):
pick this process's accelerator from LOCAL_RANK, let torch.distributed choose the backend for it,
wrap a two-layer network in DistributedDataParallel with ``device_ids``, take one SGD step.

    torchrun --nnodes=2 --nproc-per-node=8 ddp_tutorial.py
"""

import os

import torch
from torch import distributed as dist
from torch import nn, optim
from torch.nn.parallel import DistributedDataParallel


def two_layer_net() -> nn.Module:
    """10 features in, 5 out, one hidden layer of 10 with a ReLU."""
    return nn.Sequential(nn.Linear(10, 10), nn.ReLU(), nn.Linear(10, 5))


def one_step(net: nn.Module, device: int) -> float:
    """Forward a random batch of 20 (left on the host: DDP moves it), backward, one SGD update."""
    sgd = optim.SGD(net.parameters(), lr=1e-3)
    sgd.zero_grad()
    prediction = net(torch.randn(20, 10))
    target = torch.randn(20, 5).to(device)
    loss = nn.MSELoss()(prediction, target)
    loss.backward()
    sgd.step()
    return loss.item()


if __name__ == "__main__":
    torch.accelerator.set_device_index(int(os.environ["LOCAL_RANK"]))
    accelerator = torch.accelerator.current_accelerator()
    dist.init_process_group(dist.get_default_backend_for_device(accelerator))
    me = dist.get_rank()
    print(f"[rank {me}] joined a group of {dist.get_world_size()} processes")
    device = me % torch.accelerator.device_count()
    ddp_net = DistributedDataParallel(two_layer_net().to(device), device_ids=[device])
    loss = one_step(ddp_net, device)
    dist.destroy_process_group()
    print(f"[rank {me}] one DDP step done, loss {loss:.4f}")
