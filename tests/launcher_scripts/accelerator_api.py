"""The torch.accelerator API, as a device-agnostic training script uses it; rank 0 writes what it saw."""

import json
import os
import sys

import torch
import torch.distributed as dist

if __name__ == "__main__":
    seen = {"available": torch.accelerator.is_available(), "count": torch.accelerator.device_count()}
    acc = torch.accelerator.current_accelerator()
    torch.accelerator.set_device_index(int(os.environ["LOCAL_RANK"]))
    seen |= {"type": acc.type, "index": torch.accelerator.current_device_index()}
    seen["backend"] = dist.get_default_backend_for_device(acc)
    dist.init_process_group(seen["backend"], device_id=torch.device(acc.type, seen["index"]))
    seen["group_backend"] = dist.get_backend()
    before = torch.accelerator.memory_allocated()
    t = torch.full((1024,), float(dist.get_rank()), device=acc)
    seen["grew"] = torch.accelerator.memory_allocated() - before
    dist.all_reduce(t)
    torch.accelerator.synchronize()
    seen["sum"] = t[0].item()
    seen["cuda"] = [torch.cuda.is_available(), torch.cuda.device_count(), torch.cuda.current_device()]
    seen["env"] = {
        k: os.environ[k] for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK")
    }
    everyone = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, seen)
    if dist.get_rank() == 0:
        with open(sys.argv[1], "w") as f:
            json.dump(everyone, f)
    dist.destroy_process_group()
