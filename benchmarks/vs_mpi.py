"""The package against MPI and gloo on one host, interleaved in the same processes.

    pip install -e .[mpi]   # MPICH's mpiexec and mpi4py (an optional extra)
    mpiexec -n 2 python benchmarks/vs_mpi.py --json benchmarks/results/mpi/np2.json

Every rank of an ``mpiexec`` job also joins a gloo process group. For each
collective (all-reduce, all-gather, reduce-scatter, broadcast) and size, three
implementations run interleaved, call by call, in rotated order within every
repetition: MPI's (mpi4py on numpy arrays), gloo's own (``torch.distributed``)
and the package's (``auto``, on tensors in symmetric memory over the
shared-memory transport, with its cross-rank argument check on, as by
default). Each result is checked first. A repetition's time is the slowest
rank's mean call; the median over repetitions gives busbw (nccl-tests'
definitions). The machine's copy bandwidth (one core, a 64 MiB ``copy_``) is
measured in the same job, to say what bounds the largest sizes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np
import torch
import torch.distributed as dist

import mycollectives as mc
from mycollectives import symmetric
from mycollectives.bench.factors import parse_size
from mycollectives.bench.report import machine
from mycollectives.collectives import busbw_factor

COMPARED = ("all_reduce", "all_gather", "reduce_scatter", "broadcast")  # the keys of CALLS
IMPLS = ("mpi", "gloo", "ours")


def setup(comm) -> None:
    """A gloo group over the MPI job's ranks (a file store that rank 0 names)."""
    path = comm.bcast(tempfile.mktemp(prefix="vs-mpi-") if comm.rank == 0 else None, root=0)
    os.environ["MYCOLLECTIVES_TRANSPORT"] = "shm"
    dist.init_process_group("gloo", init_method=f"file://{path}", rank=comm.rank, world_size=comm.size)
    torch.set_num_threads(1)


def _heap(k: int) -> torch.Tensor:
    """``k`` float32 in symmetric memory, rendezvoused on the default group."""
    x = symmetric.empty(k)
    symmetric.rendezvous(x)
    return x


def _all_reduce(comm, MPI, n: int, block: int):
    p, r = comm.size, comm.rank
    a, t, s = np.ones(n, np.float32), torch.ones(n), _heap(n)
    run = {
        "mpi": lambda: comm.Allreduce(MPI.IN_PLACE, a, op=MPI.SUM),
        "gloo": lambda: dist.all_reduce(t),
        "ours": lambda: mc.all_reduce(s),
    }
    bufs = {"mpi": a, "gloo": t, "ours": s}

    def check(impl):
        x = bufs[impl]
        x[:] = r + 1
        run[impl]()
        return bool(np.all(np.asarray(x) == p * (p + 1) / 2))

    return run, check


def _all_gather(comm, MPI, n: int, block: int):
    p, r = comm.size, comm.rank
    a_in, a_out = np.full(block, r, np.float32), np.zeros(p * block, np.float32)
    t_in, t_out = torch.full((block,), float(r)), torch.zeros(p * block)
    s_out = _heap(p * block)
    run = {
        "mpi": lambda: comm.Allgather(a_in, a_out),
        "gloo": lambda: dist.all_gather_into_tensor(t_out, t_in),
        "ours": lambda: mc.all_gather_into_tensor(s_out, t_in),
    }
    outs = {"mpi": a_out, "gloo": t_out, "ours": s_out}
    want = np.repeat(np.arange(p, dtype=np.float32), block)

    def check(impl):
        run[impl]()
        return bool(np.array_equal(np.asarray(outs[impl]), want))

    return run, check


def _reduce_scatter(comm, MPI, n: int, block: int):
    p = comm.size
    a_in, a_out = np.ones(p * block, np.float32), np.zeros(block, np.float32)
    t_in, t_out = torch.ones(p * block), torch.zeros(block)
    s_in = _heap(p * block)
    s_in.fill_(1.0)
    run = {
        "mpi": lambda: comm.Reduce_scatter_block(a_in, a_out, op=MPI.SUM),
        "gloo": lambda: dist.reduce_scatter_single(t_out, t_in),
        "ours": lambda: mc.reduce_scatter_tensor(t_out, s_in),
    }
    outs = {"mpi": a_out, "gloo": t_out, "ours": t_out}

    def check(impl):
        outs[impl][:] = 0
        run[impl]()
        return bool(np.all(np.asarray(outs[impl]) == p))

    return run, check


def _broadcast(comm, MPI, n: int, block: int):
    a, t, s = np.zeros(n, np.float32), torch.zeros(n), _heap(n)
    run = {
        "mpi": lambda: comm.Bcast(a, root=0),
        "gloo": lambda: dist.broadcast(t, 0),
        "ours": lambda: mc.broadcast(s, 0),
    }
    bufs = {"mpi": a, "gloo": t, "ours": s}

    def check(impl):
        x = bufs[impl]
        x[:] = 7.0 if comm.rank == 0 else 0.0
        run[impl]()
        return bool(np.all(np.asarray(x) == 7.0))

    return run, check


# each collective's three implementations (MPI, torch.distributed on gloo, the package) and a check
CALLS = {
    "all_reduce": _all_reduce,
    "all_gather": _all_gather,
    "reduce_scatter": _reduce_scatter,
    "broadcast": _broadcast,
}


def calls(comm, collective: str, size: int) -> tuple[dict, object]:
    """The three implementations of ``collective`` on ``size`` bytes (nccl-tests' size), and a check of each."""
    from mpi4py import MPI

    n = size // 4  # float32 elements of the size buffer
    return CALLS[collective](comm, MPI, n, n // comm.size)


def measure(comm, collective: str, size: int, reps: int, iters: int) -> dict:
    from mpi4py import MPI

    run, check = calls(comm, collective, size)
    ok = {impl: check(impl) for impl in IMPLS}
    for impl in IMPLS:  # warm-up
        for _ in range(2):
            run[impl]()
    times = {impl: [] for impl in IMPLS}
    for rep in range(reps):
        order = IMPLS[rep % 3 :] + IMPLS[: rep % 3]
        for impl in order:
            comm.Barrier()
            t0 = time.perf_counter()
            for _ in range(iters):
                run[impl]()
            mine = (time.perf_counter() - t0) / iters
            times[impl].append(comm.allreduce(mine, op=MPI.MAX))
    p = comm.size
    out = {"collective": collective, "size": size, "world_size": p, "correct": ok, "times_s": times}
    out["busbw"] = {
        i: size / statistics.median(v) / 1e9 * busbw_factor(collective, p) for i, v in times.items()
    }
    return out


def copy_gbs(comm) -> float:
    """One core's copy bandwidth, 64 MiB, measured on rank 0 while the others wait."""
    best = 0.0
    if comm.rank == 0:
        x, y = torch.ones(16 << 20), torch.empty(16 << 20)
        for _ in range(5):
            t0 = time.perf_counter()
            y.copy_(x)
            best = max(best, x.numel() * 4 / (time.perf_counter() - t0) / 1e9)
    return comm.bcast(best, root=0)


def main() -> None:
    from mpi4py import MPI

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="64K,1M,16M,64M")
    ap.add_argument("--collectives", default=",".join(COMPARED))
    ap.add_argument("--reps", type=int, default=11)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    comm = MPI.COMM_WORLD
    setup(comm)
    results = []
    gbs = copy_gbs(comm)
    for collective in args.collectives.split(","):
        for size in [parse_size(s) for s in args.sizes.split(",")]:
            iters = max(1, min(50, (4 << 20) // size))
            res = measure(comm, collective, size, args.reps, iters)
            results.append(res)
            if comm.rank == 0:
                b = res["busbw"]
                print(f"{collective:>15s} p={comm.size} {size:>9d} B  busbw GB/s: mpi {b['mpi']:7.3f}  "
                      f"gloo {b['gloo']:7.3f}  ours {b['ours']:7.3f}  ours/mpi {b['ours'] / b['mpi']:5.2f}  "
                      f"correct {all(res['correct'].values())}", flush=True)  # fmt: skip
    if comm.rank == 0:
        print(f"copy bandwidth, one core: {gbs:.2f} GB/s")
        if args.json:
            meta = machine("gloo", comm.size) | {
                "mpi": MPI.Get_library_version().splitlines()[0],
                "transport": "shm",
                "copy_gbs": gbs,
                "command": "mpiexec -n {} {}".format(comm.size, " ".join([sys.executable, *sys.argv])),
            }
            with open(args.json, "w") as f:
                json.dump({"machine": meta, "results": results}, f, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
