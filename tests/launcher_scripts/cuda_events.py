"""Timing a matrix product on each rank's GPU with CUDA events; rank 0 writes the times to --out."""

import json
import os
import sys

import torch
import torch.distributed as dist


def main():
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group(backend="nccl")
    n = 256
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device=torch.device("cuda", local_rank), dtype=torch.bfloat16)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    c = a @ b
    end.record()
    torch.cuda.synchronize()
    matmul_ms = start.elapsed_time(end)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        d = c.sum()
    s.synchronize()
    x = torch.ones(1 << 20, device="cuda")
    start.record()
    dist.all_reduce(x)
    end.record()
    torch.cuda.synchronize()
    out = {
        "matmul_ms": matmul_ms,
        "all_reduce_ms": start.elapsed_time(end),
        "sum": float(x[0]),
        "d": float(d) * 0,
    }
    if dist.get_rank() == 0:
        with open(sys.argv[1], "w") as f:
            json.dump(out, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
