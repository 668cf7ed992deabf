"""A CPU script with gloo: collectives, object collectives, a subgroup, a DistributedSampler."""

import json
import os
import sys

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

if __name__ == "__main__":
    addr, port = os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"]
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", init_method=f"tcp://{addr}:{port}", rank=rank, world_size=world)
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t)
    objs = [{"from": rank}] if rank == 0 else [None]
    dist.broadcast_object_list(objs, src=0)
    evens = dist.new_group([r for r in range(world) if r % 2 == 0])
    e = torch.tensor([1.0])
    if rank % 2 == 0:
        dist.all_reduce(e, group=evens)
    backends = [dist.get_backend(), dist.get_backend(evens) if rank % 2 == 0 else "gloo"]
    data = TensorDataset(torch.arange(16.0))
    sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=False)
    seen = [x.item() for (batch,) in DataLoader(data, batch_size=2, sampler=sampler) for x in batch]
    dist.barrier()
    gathered = [None] * world
    dist.all_gather_object(
        gathered,
        {
            "rank": rank,
            "sum": t.item(),
            "obj": objs[0],
            "evens": e.item(),
            "seen": seen,
            "backends": backends,
        },
    )
    if rank == 0:
        with open(sys.argv[1], "w") as f:
            json.dump(gathered, f)
    dist.destroy_process_group()
