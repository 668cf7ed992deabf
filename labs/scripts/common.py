"""What every lab script shares: process-group set-up, the device, timing, results.

A script is launched by ``torchrun`` (one process per rank). On a node with
enough GPUs it uses NCCL and ``cuda:LOCAL_RANK``; otherwise gloo on the CPU.
``MYCOLLECTIVES_DEVICE=cpu`` forces the CPU path (the book's tests set it).
Rank 0 writes its results as JSON to ``--out`` for the notebook to plot.

``--virtual NODE[:NODES]`` (``--virtual dgx_h100:2``) runs the same ``main``
without torchrun: every GPU of a modelled cluster is a thread of one process
(``mycollectives.virtual``), ``torch.distributed`` in each thread is the
package's (``mycollectives.torchpg``), and :func:`clock` reads the rank's
virtual time, so the timings are the modelled cluster's. (``--threads N``,
for tests, runs N thread ranks on a local world, in wall time.)
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import sys
import weakref
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
    mode: str = "torchrun"  # or "virtual" (a modelled cluster) or "threads" (a local world)
    cluster: str | None = None  # --virtual's NODE[:NODES]

    @property
    def gpu(self) -> bool:
        return self.device.type == "cuda"


def use_gpus(local_size: int) -> bool:
    """NCCL, one GPU per rank, when every local rank can have its own GPU."""
    if os.environ.get("MYCOLLECTIVES_DEVICE", "auto") == "cpu":
        return False
    return torch.cuda.is_available() and local_size <= torch.cuda.device_count()


def setup(timeout_s: float = 120.0) -> Env:
    """Initialise the default process group from torchrun's environment (or, in a rank thread
    started by :func:`launch`, take the thread's own)."""
    if _mode:
        return _thread_env()
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


_native: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # per default group (per thread world)


def native_group() -> dist.ProcessGroup:
    """A second group over all ranks, for torch's own collectives (DDP, dist.all_reduce).

    Our collectives use the default group's point-to-point messages; giving
    torch's collectives a communicator of their own keeps the two from sharing
    one gloo context (sharing one made processes abort at exit now and then).
    :func:`setup` creates it, on every rank at the same point.
    """
    world = dist.group.WORLD
    if world not in _native:
        _native[world] = dist.new_group(backend=dist.get_backend())
    return _native[world]


def teardown() -> None:
    if dist.is_initialized():
        dist.barrier(group=native_group())
        dist.destroy_process_group()


def sync(env: Env) -> None:
    """Wait for this rank's queued GPU work (host timers need it; a no-op on CPU)."""
    if env.gpu:
        torch.cuda.synchronize(env.device)


def clock(env: Env) -> float:
    """This rank's timer, in seconds: virtual time in a virtual run; elsewhere wall time once
    the GPU's queued work is done."""
    from mycollectives import timing

    sync(env)  # on a virtual cluster (--virtual, or the launcher) timing.now is the rank's virtual clock
    return timing.now()


def timed(env: Env, fn: Callable[[], object], reps: int, warmup: int = 1) -> float:
    """Median seconds of ``fn()`` over ``reps`` runs, ranks lined up before each."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        dist.barrier(group=native_group())
        t0 = clock(env)
        fn()
        times.append(clock(env) - t0)
    times.sort()
    return times[len(times) // 2]


def parser(doc: str | None) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=None, help="rank 0 writes its results here as JSON")
    _mode_options(p)
    return p


def _mode_options(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument(
        "--virtual",
        metavar="NODE[:NODES]",
        default=None,
        help="run on a virtual cluster (e.g. dgx_h100:2), ranks as threads, in virtual time, without torchrun",
    )
    p.add_argument(
        "--ranks",
        type=int,
        default=None,
        help="with --virtual: use only the first N GPUs of the cluster (default: all of them)",
    )
    p.add_argument("--threads", type=int, default=None, help=argparse.SUPPRESS)  # N thread ranks (tests)
    return p


def describe(env: Env) -> dict:
    name = torch.cuda.get_device_name(env.device) if env.gpu else "CPU"
    if env.mode == "virtual":
        name = f"virtual {env.cluster}"
    out = dict(world_size=env.world_size, local_size=env.local_size, backend=env.backend, device=name)
    return {**out, "mode": env.mode}


def save(env: Env, out: Path | None, result: dict) -> None:
    """Rank 0 writes ``result`` (plus the job's description) to ``out``."""
    if env.rank == 0 and out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({**describe(env), **result}, indent=1))


def time_label(env: Env) -> str:
    """What this run's times are: "virtual time on dgx_h100 x2" (the model's, not a measurement),
    or wall time on the device that ran them."""
    if env.mode == "virtual":
        node, _, nodes = (env.cluster or "").partition(":")
        return f"virtual time on {node} x{nodes or 1}, {env.world_size} GPUs (modelled, not measured)"
    return f"wall time on {describe(env)['device']}, {env.world_size} ranks"


def log(env: Env, *args: object) -> None:
    if env.rank == 0:
        print(*args, flush=True)


def make_model(width: int, depth: int, env: Env) -> nn.Module:
    """The labs' small MLP (DDP, FSDP), with the same initial weights on every
    rank and in the single-process reference."""
    layers: list[nn.Module] = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.GELU()]
    return seeded(nn.Sequential(*layers, nn.Linear(width, 1))).to(env.device)


def seeded(model: nn.Module, seed: int = 0) -> nn.Module:
    """``model`` with its Linear layers drawn as torch draws them (uniform in +-1/sqrt(fan_in))
    from a generator of its own: ranks that are threads share torch's global generator."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.Linear):
                bound = 1 / math.sqrt(m.in_features)
                for q in (m.weight, m.bias):
                    if q is not None:
                        q.uniform_(-bound, bound, generator=g)
    return model


# -- ranks as threads: --virtual NODE[:NODES] (or --threads N) --------------------------------

_mode: dict = {}  # set by launch(), read by every rank thread's setup()


def launch(main: Callable[[], None]) -> None:
    """Run a script's ``main``: once, as torchrun started this process; or, with ``--virtual``
    or ``--threads``, once per rank thread (the same code, the ranks of one process)."""
    known, _ = _mode_options(argparse.ArgumentParser(add_help=False)).parse_known_args(sys.argv[1:])
    if known.virtual:
        _run_virtual(main, known.virtual, known.ranks)
    elif known.threads:
        _run_threads(main, known.threads)
    else:
        main()


def _run_virtual(main: Callable[[], None], spec: str, ranks: int | None = None) -> None:
    node, _, count = spec.partition(":")
    if not node or not (count or "1").isdigit() or int(count or "1") < 1:
        raise SystemExit(f"--virtual {spec!r}: expected NODE[:NODES], such as dgx_h100 or dgx_h100:2")
    try:
        from mycollectives import virtual
    except ImportError as e:
        raise SystemExit(
            f"--virtual needs mycollectives.virtual, which this copy of the package lacks ({e})"
        ) from e
    from mycollectives import torchpg

    _mode.update(mode="virtual", cluster=spec)
    torch.set_num_threads(1)
    virtual.run(
        lambda rank: main(), cluster=node, nodes=int(count or "1"), world_size=ranks, setup=[torchpg.setup]
    )


def _run_threads(main: Callable[[], None], n: int) -> None:
    from mycollectives import torchpg
    from mycollectives.transport import LocalWorld

    def body(rank: int) -> None:
        with torchpg.thread_world(rank, n):
            main()

    _mode.update(mode="threads", cluster=None)
    torch.set_num_threads(1)
    LocalWorld(n).run(body)


def _thread_env() -> Env:
    """This rank thread's place: ``torch.distributed`` is the thread's own (see :func:`launch`)."""
    from mycollectives.transport import current_local

    rank, world = dist.get_rank(), dist.get_world_size()
    local_size = min(
        getattr(current_local(), "local_size", None) or world, world
    )  # a virtual run knows its nodes
    native_group()
    device = torch.device("cpu")
    return Env(rank, world, rank % local_size, local_size, device, dist.get_backend(), **_mode)
