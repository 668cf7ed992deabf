"""What the flight recorder costs a collective: the same calls with it on and off, interleaved.

    python benchmarks/flight_overhead.py --nprocs 2 --json benchmarks/results/flight/np2.json

In the same processes, each repetition runs ``--calls`` all-reduces with the
recorder on (``mycollectives.flight.set_size(2000)``, the default), then as
many with it off (``set_size(0)``), the order alternating between
repetitions, for three paths: tensors in symmetric memory over the
shared-memory transport (the load/store path the package tunes against MPI at
64 KiB), ordinary tensors over the shared-memory transport (messages), and
the process group's own send/recv (gloo). A repetition's time is the slowest
rank's mean call; the overhead is the median over repetitions of the
difference on minus off, with the spread of that difference across
repetitions (its 25th and 75th percentiles) beside it; the same for the
calling thread's CPU time (``time.thread_time``), which time spent waiting
for peers or for a core does not inflate. A fourth path, a
group of one process, runs the whole call (arguments, recorder, schedule of
no rounds) with no peer to wait for: there the difference is the recorder's
CPU time alone, measurable even on a busy machine. With the recorder off
the executor still writes its round and peer to a shared placeholder entry:
``--micro`` times those writes, and the recorder's own hooks, alone.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SIZES = (8, 1024, 65536)
PATHS = ("one", "symmetric", "shm", "gloo")


def _run(rank: int, path: str, sizes, calls: int, reps: int) -> dict:
    os.environ["MYCOLLECTIVES_TRANSPORT"] = (
        "group" if path in ("gloo", "one") else "shm"
    )  # the default group's
    import torch

    import mycollectives as mc
    from mycollectives import flight, symmetric

    torch.set_num_threads(1)
    group = None
    out = {}
    for size in sizes:
        n = max(size // 4, 1)
        if path == "symmetric":
            t = symmetric.empty(n)
            symmetric.rendezvous(t)
        else:
            t = torch.ones(n)
        for _ in range(50):
            mc.all_reduce(t, group=group)
        runs = {"on": [], "off": [], "on_cpu": [], "off_cpu": []}
        for rep in range(reps):
            for size_ in (2000, 0) if rep % 2 == 0 else (0, 2000):
                flight.set_size(size_)
                mc.all_reduce(t, group=group)  # line the ranks up
                t0, c0 = time.perf_counter(), time.thread_time()
                for _ in range(calls):
                    mc.all_reduce(t, group=group)
                key = "on" if size_ else "off"
                runs[key].append((time.perf_counter() - t0) / calls)
                runs[key + "_cpu"].append((time.thread_time() - c0) / calls)
        flight.set_size(2000)
        out[size] = runs
    return out


def micro() -> dict:
    """The hot path's pieces alone, in microseconds per call (one process, no peers)."""
    import torch

    from mycollectives import flight
    from mycollectives.api.core import Meta

    class T:  # a stand-in transport: what the recorder reads
        local, rank, world_size = True, 0, 1

    t, meta = T(), Meta(torch.float32, 16384)
    n = 200_000

    def call():
        e = flight.posted(t, "all_reduce", "auto", meta)
        flight.track(e, lambda: None)()

    def note():  # what the executor writes for a two-round schedule with one receive and one send a round
        e = flight.current()
        e.enter("ring", 2, "all_reduce")
        for r in (0, 1):
            e.round = r
            for peer in (1, 1, 1):
                e.peer, e.what = peer, "receive from"
                e.peer = e.what = None

    return {
        "posted+track (us)": timeit.timeit(call, number=n) / n * 1e6,
        "executor notes, 2 rounds (us)": timeit.timeit(note, number=n) / n * 1e6,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nprocs", type=int, default=2)
    p.add_argument("--calls", type=int, default=200)
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--paths", default=",".join(PATHS))
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--micro", action="store_true", help="only time the hooks alone")
    args = p.parse_args()
    result = {"micro": micro()}
    print(*(f"{k}: {v:.3f}" for k, v in result["micro"].items()), sep="\n")
    if not args.micro:
        import mycollectives as mc
        from mycollectives.bench.report import machine

        result["machine"] = machine("gloo", args.nprocs)
        print(
            f"{'path':>10} {'size (B)':>9} {'off (us)':>9} {'on (us)':>9} {'on-off (us)':>12} {'IQR':>14}"
            f" {'CPU on-off (us)':>16} {'IQR':>14}"
        )
        for path in args.paths.split(","):
            nprocs = 1 if path == "one" else args.nprocs
            per_rank = mc.run_gloo(_run, nprocs, path, SIZES, args.calls, args.reps)
            for size in SIZES:
                on = [max(r[size]["on"][i] for r in per_rank) * 1e6 for i in range(args.reps)]
                off = [max(r[size]["off"][i] for r in per_rank) * 1e6 for i in range(args.reps)]
                diff = [a - b for a, b in zip(on, off)]
                # CPU time of the calling thread, each rank's difference, averaged over ranks
                cpu = [
                    statistics.mean((r[size]["on_cpu"][i] - r[size]["off_cpu"][i]) * 1e6 for r in per_rank)
                    for i in range(args.reps)
                ]
                q, qc = statistics.quantiles(diff, n=4), statistics.quantiles(cpu, n=4)
                row = dict(
                    path=path,
                    size=size,
                    off_us=statistics.median(off),
                    on_us=statistics.median(on),
                    overhead_us=statistics.median(diff),
                    overhead_iqr_us=(q[0], q[2]),
                    cpu_overhead_us=statistics.median(cpu),
                    cpu_overhead_iqr_us=(qc[0], qc[2]),
                )
                result.setdefault("rows", []).append(row)
                print(
                    f"{path:>10} {size:9d} {row['off_us']:9.1f} {row['on_us']:9.1f} "
                    f"{row['overhead_us']:12.2f} {q[0]:6.2f}..{q[2]:<6.2f} "
                    f"{row['cpu_overhead_us']:16.2f} {qc[0]:6.2f}..{qc[2]:<6.2f}"
                )
        result["command"] = " ".join(sys.argv)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
