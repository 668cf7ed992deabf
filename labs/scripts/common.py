"""What every lab script shares: process-group set-up, the device, timing, results.

A script is launched by ``torchrun`` (one process per rank). On a node with
enough GPUs it uses NCCL and ``cuda:LOCAL_RANK``; otherwise gloo on the CPU.
``MYCOLLECTIVES_DEVICE=cpu`` forces the CPU path (the book's tests set it).
Rank 0 writes its results as JSON to ``--out`` for the notebook to plot.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn


@dataclass(frozen=True)
class Env:
    """This rank's place in the job."""

    rank: int
    world_size: int
    local_rank: int
    local_size: int
    device: torch.device
    backend: str

    @property
    def gpu(self) -> bool:
        return self.device.type == "cuda"


def use_gpus(local_size: int) -> bool:
    """NCCL, one GPU per rank, when every local rank can have its own GPU."""
    if os.environ.get("MYCOLLECTIVES_DEVICE", "auto") == "cpu":
        return False
    return torch.cuda.is_available() and local_size <= torch.cuda.device_count()


def setup(timeout_s: float = 120.0) -> Env:
    """Initialise the default process group from torchrun's environment."""
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    local_size = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    if use_gpus(local_size):
        device, backend = torch.device("cuda", local_rank), "nccl"
        torch.cuda.set_device(device)
    else:
        device, backend = torch.device("cpu"), "gloo"
        torch.set_num_threads(1)  # 4 ranks on 2 cores: one thread each
    kwargs = {"device_id": device} if backend == "nccl" else {}
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout_s), **kwargs)
    native_group()
    return Env(rank, world, local_rank, local_size, device, backend)


_native: dict[str, dist.ProcessGroup] = {}


def native_group() -> dist.ProcessGroup:
    """A second group over all ranks, for torch's own collectives (DDP, dist.all_reduce).

    Our collectives use the default group's point-to-point messages; giving
    torch's collectives a communicator of their own keeps the two from sharing
    one gloo context (sharing one made processes abort at exit now and then).
    :func:`setup` creates it, on every rank at the same point.
    """
    if "world" not in _native:
        _native["world"] = dist.new_group(backend=dist.get_backend())
    return _native["world"]


def teardown() -> None:
    if dist.is_initialized():
        dist.barrier(group=native_group())
        dist.destroy_process_group()


def sync(env: Env) -> None:
    """Wait for this rank's queued GPU work (host timers need it; a no-op on CPU)."""
    if env.gpu:
        torch.cuda.synchronize(env.device)


def timed(env: Env, fn: Callable[[], object], reps: int, warmup: int = 1) -> float:
    """Median seconds of ``fn()`` over ``reps`` runs, ranks lined up before each."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        dist.barrier(group=native_group())
        sync(env)
        t0 = time.perf_counter()
        fn()
        sync(env)
        times.append(time.perf_counter() - t0)
    times.sort()
    return times[len(times) // 2]


def parser(doc: str | None) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=None, help="rank 0 writes its results here as JSON")
    return p


def describe(env: Env) -> dict:
    name = torch.cuda.get_device_name(env.device) if env.gpu else "CPU"
    return dict(world_size=env.world_size, local_size=env.local_size, backend=env.backend, device=name)


def save(env: Env, out: Path | None, result: dict) -> None:
    """Rank 0 writes ``result`` (plus the job's description) to ``out``."""
    if env.rank == 0 and out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({**describe(env), **result}, indent=1))


def log(env: Env, *args: object) -> None:
    if env.rank == 0:
        print(*args, flush=True)


def make_model(width: int, depth: int, env: Env) -> nn.Module:
    """The labs' small MLP (DDP, FSDP), with the same initial weights on every
    rank and in the single-process reference."""
    torch.manual_seed(0)
    layers: list[nn.Module] = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.GELU()]
    return nn.Sequential(*layers, nn.Linear(width, 1)).to(env.device)
