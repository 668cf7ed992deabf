"""Where a CUDA script's tensors say they are: the checks such scripts make, after each way of moving
a tensor or a model to the GPU; rank 0 writes what every rank saw.

    torchrun --nproc-per-node 2 device_checks.py seen.json
"""

import json
import os
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def where(t: torch.Tensor) -> list:
    return [str(t.device), t.device.type, t.is_cuda, t.is_cpu, t.get_device()]


if __name__ == "__main__":
    local = int(os.environ["LOCAL_RANK"])
    dist.init_process_group("nccl")
    seen = {"current": torch.cuda.current_device()}  # no set_device yet: 0 on every rank
    x = torch.randn(4, 3).to(local)  # as the DDP tutorial moves its model, by index
    net = DDP(nn.Linear(3, 2).to(local), device_ids=[local])
    y = net(x)
    seen |= {"to_int": where(x), "param": where(net.module.weight), "output": where(y)}
    seen["same"] = x.device == torch.device("cuda", local) == y.device
    torch.cuda.set_device(local)
    ways = {
        "cuda()": torch.ones(2).cuda(),
        "to(str)": torch.ones(2).to(f"cuda:{local}"),
        "to(device)": torch.ones(2).to(torch.device("cuda", local)),
        "factory": torch.zeros(2, device="cuda"),
        "to(dtype)": torch.zeros(2, device="cuda").to(torch.float64),
    }
    seen["ways"] = {k: where(t) for k, t in ways.items()}
    host = y.detach().cpu()
    seen["cpu()"] = where(host) + [where(host * 2), where(host.cuda()), where(y)]
    seen["to_cpu"] = where(y.to("cpu")) + where(torch.zeros(2, device="cpu"))
    seen["values"] = bool(torch.equal(host, y.detach())) and host.numpy().shape == (4, 2)
    ledger = [torch.cuda.memory_allocated()]
    on_gpu = torch.ones(1024, device="cuda")
    ledger.append(torch.cuda.memory_allocated())
    on_host = on_gpu.cpu()
    ledger.append(torch.cuda.memory_allocated())
    seen["ledger"] = [ledger[1] - ledger[0], ledger[2] - ledger[1], on_host.nbytes]
    everyone = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, seen)
    if dist.get_rank() == 0:
        with open(sys.argv[1], "w") as f:
            json.dump(everyone, f)
    dist.destroy_process_group()
