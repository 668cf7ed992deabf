"""``python -m mycollectives.bench``: nccl-tests' flags, our algorithms, the native one.

Launch under ``torchrun`` (one process per GPU with NCCL, or gloo on CPUs),
or let ``--nprocs N`` spawn N local gloo processes. Flags as in nccl-tests
(``-b -e -f -i -n -w -c -o -d -r``); ``-o`` is the reduction op, as there,
and ``--collective`` picks the collective (nccl-tests has one binary each).
``--virtual NODE --nodes N`` runs the sweep on a virtual cluster instead
(:mod:`.virtual`). Every flag is checked before any process starts: a bad
one is refused in one line, exit status 2 (``mycollectives.cliargs``), never
a traceback from each rank.
"""

from __future__ import annotations

import os
import socket
import sys

import torch
import torch.distributed as dist

from ..cliargs import Parser, Refusal, integer, switch
from ..collectives import records
from ..transport import TRANSPORT_ENV, TRANSPORTS
from ..transport.launcher import run_gloo
from . import report
from .factors import DTYPES, parse_size, sizes
from .flags import algorithm_list, check_counts, check_op, check_sizes
from .virtual import add_flags, cli_main


def data_collectives() -> tuple[str, ...]:
    """nccl-tests' collectives: those that move data (read now, so that a record added later is one)."""
    return tuple(c.name for c in records() if c.bound(2) > 0)


def parser() -> Parser:
    p = Parser(prog="python -m mycollectives.bench", description=__doc__.splitlines()[0])
    a = p.add_argument
    a(
        "--collective",
        "-C",
        default="all_reduce",
        choices=data_collectives(),
        help="the collective (default all_reduce)",
    )
    a("-b", "--minbytes", default="32M", help="smallest size, e.g. 8, 64K, 16M (default 32M)")
    a("-e", "--maxbytes", default="32M", help="largest size (default 32M)")
    a("-f", "--stepfactor", type=integer(1), default=2, help="multiply the size by this (default 2)")
    a("-i", "--stepbytes", default="0", help="add this many bytes instead of multiplying")
    a("-n", "--iters", type=integer(-(2**31)), default=20, help="timed calls per repetition (default 20)")
    a("-w", "--warmup_iters", type=integer(-(2**31)), default=5, help="untimed calls first (default 5)")
    a("-c", "--check", type=switch, default=1, help="check results (1) or not (0); default 1")
    a("-o", "--op", default="sum", choices=("sum", "prod", "min", "max", "avg"), help="reduction op")
    a("-d", "--datatype", default="float", choices=sorted(DTYPES), help="element type (default float)")
    a("-r", "--root", type=integer(0), default=0, help="root of rooted collectives (default 0)")
    a("--algorithm", default="all", help="ours, a comma list, 'all' (ours, auto and native) or 'native'")
    a("--reps", type=integer(-(2**31)), default=5, help="repetitions, interleaved; median shown (default 5)")
    a(
        "--nprocs",
        type=integer(0),
        default=0,
        help="spawn this many local gloo processes (not under torchrun)",
    )
    a("--device", choices=("auto", "cpu", "cuda"), default="auto", help="cuda (NCCL) if available, else cpu")
    a(
        "--threads",
        type=integer(0),
        default=0,
        help="torch.set_num_threads per process (0: cores / processes, at least 1, as torchrun's OMP_NUM_THREADS=1)",
    )
    a(
        "--transport",
        choices=("auto", *TRANSPORTS),  # the table transports are chosen from: a new entry is a choice
        default="auto",
        help="how our algorithms move bytes, an entry of mycollectives.transport.TRANSPORTS: 'group' (send/recv), "
        "'shm' (shared memory, one host, CPU), one registered, or 'auto' (shm on CPU on one node, else group)",
    )
    a("--arg-check", type=switch, default=0, help="1: keep our cross-rank argument check in the timing")
    a("--csv", help="write the results as CSV here (rank 0)")
    a("--json", help="write the results and the machine as JSON here (rank 0)")
    a("--plot", help="draw busbw against size, one line per algorithm, into this image (rank 0)")
    a(
        "--calibrate",
        type=switch,
        default=0,
        help="1: calibrate alpha, beta, gamma by ping-pong first (into the JSON), and after the sweep "
        "fit them to it and print predicted against measured (mycollectives.bench.predicted)",
    )
    a("--progress", type=switch, default=1, help="progress bar on stderr (default 1)")
    add_flags(p)
    return p


def _device(args) -> torch.device:
    want_cuda = args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
    if want_cuda:
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
    return torch.device("cpu")


def transport_kind(args, device: torch.device) -> str:
    """``--transport`` resolved: ``auto`` is shared memory for CPU ranks that
    all run on this node (as NCCL picks its SHM transport within a node)."""
    one_node = int(os.environ.get("LOCAL_WORLD_SIZE", -1)) == dist.get_world_size()
    kind = args.transport
    if kind == "auto":
        kind = "shm" if device.type == "cpu" and one_node and dist.get_world_size() > 1 else "group"
    if kind == "shm" and device.type != "cpu":
        raise Refusal("--transport shm moves CPU tensors; on GPUs use --transport group (NCCL)")
    return kind


def bench(args) -> list:
    """The body every rank runs once the process group is up."""
    from .runner import run_sweep

    local = int(os.environ.get("LOCAL_WORLD_SIZE", dist.get_world_size()))
    torch.set_num_threads(args.threads or max(1, (os.cpu_count() or 1) // local))
    device = _device(args)
    rank, p = dist.get_rank(), dist.get_world_size()
    algs = algorithm_list(args.algorithm, args.collective)
    sweep = sizes(
        parse_size(args.minbytes), parse_size(args.maxbytes), args.stepfactor, parse_size(args.stepbytes)
    )
    say = print if rank == 0 else (lambda *a, **k: None)
    meta = report.machine(dist.get_backend(), p)
    meta["transport"] = os.environ[TRANSPORT_ENV] = transport_kind(args, device)
    say(f"# mycollectives.bench {args.collective}: nranks {p} backend {meta['backend']} "
        f"transport {meta['transport']} device {device} "
        f"minBytes {sweep[0]} maxBytes {sweep[-1]} warmup iters: {args.warmup_iters} iters: {args.iters} "
        f"reps: {args.reps} validation: {args.check} arg-check: {args.arg_check}")  # fmt: skip
    say(f"# machine: {meta['cpu']}, {meta['cores']} cores, load average {meta['loadavg']}")
    if args.calibrate:
        from ..pingpong import calibrate

        ping = [4 << k for k in range(0, 40, 2) if 4 << k <= max(sweep[-1], 64 << 10)]
        m = calibrate(sizes=ping, reps=3, device=device).machine
        meta["calibration"] = {"alpha": m.alpha, "beta": m.beta, "gamma": m.gamma}
        say(
            f"# calibrated: alpha {m.alpha * 1e6:.2f} us, beta {m.beta * 1e9:.4f} ns/B, gamma {m.gamma * 1e9:.4f} ns/B"
        )
    say(report.header(algs), flush=True)
    results = run_sweep(
        args.collective, sweep, algs, dtype=DTYPES[args.datatype], redop=args.op, root=args.root,
        iters=args.iters, warmup=args.warmup_iters, reps=args.reps, check=bool(args.check),
        arg_check=bool(args.arg_check), device=device, progress=bool(args.progress),
        on_size=lambda rows: say(report.row(rows, algs), flush=True),
    )  # fmt: skip
    say(report.footer(results, algs))
    if args.calibrate and rank == 0:
        say(_model_report(meta, results), flush=True)
    if rank == 0:
        meta["loadavg_after"] = list(os.getloadavg())
        meta["command"] = " ".join(["python -m mycollectives.bench", *sys.argv[1:]])
        if args.csv:
            report.write_csv(args.csv, results)
        if args.json:
            report.write_json(args.json, results, meta)
        if args.plot:
            from .plot import plot_busbw

            plot_busbw(results, args.plot, title=f"{args.collective}, {p} ranks, {meta['backend']}")
    return results


def _model_report(meta: dict, results: list) -> str:
    from .predicted import report as model_report

    try:
        return model_report(meta, results)
    except ValueError as e:  # too few sizes of 64 KiB and up to fit on some and judge the rest
        return f"# model: not fitted: {e}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _spawned(rank: int, args) -> None:
    """One rank of ``--nprocs``: :func:`~mycollectives.transport.launcher.run_gloo` set up its group."""
    bench(args)


def check_world(args, world: int) -> None:
    """What the world size rules out, refused before any process starts."""
    if args.root >= world:
        raise Refusal(
            f"-r/--root: expected a rank from 0 to {world - 1} (world size {world}), got {args.root}"
        )
    if args.calibrate and world < 2:
        raise Refusal(
            f"--calibrate 1: the ping-pong calibration needs at least 2 ranks (ranks 0 and 1 bounce "
            f"messages), this run has {world}; drop --calibrate or run more ranks"
        )


def check(args) -> bool:
    """Every flag, before any process starts; whether this runs under torchrun."""
    check_counts(args)
    check_op(args)
    check_sizes(args)
    algorithm_list(args.algorithm, args.collective)
    if args.device == "cuda" and not torch.cuda.is_available():
        raise Refusal("--device cuda: no CUDA device is available here")
    if args.transport == "shm" and _device(args).type == "cuda":
        raise Refusal("--transport shm moves CPU tensors; on GPUs use --transport group (NCCL)")
    torchrun = "RANK" in os.environ and "WORLD_SIZE" in os.environ
    check_world(args, int(os.environ["WORLD_SIZE"]) if torchrun else args.nprocs or 1)
    return torchrun


def main(argv: list[str] | None = None) -> None:
    cli = parser()
    args = cli.parse_args(argv)
    if args.virtual:
        return cli_main(cli, args)
    try:
        torchrun = check(args)
    except Refusal as r:
        print(f"{cli.prog}: error: {r}", file=sys.stderr)
        raise
    if torchrun:
        device = _device(args)
        if device.type == "cuda":
            torch.cuda.set_device(device)
            dist.init_process_group("nccl", device_id=device)
        else:
            dist.init_process_group("gloo")
        try:
            bench(args)
        finally:
            dist.destroy_process_group()
        return
    n = args.nprocs or 1
    if args.device == "cuda" and n > 1:
        raise SystemExit("--nprocs spawns gloo processes on the CPU; use torchrun for several GPUs")
    if n == 1 and _device(args).type == "cuda":  # one GPU, NCCL with world size 1
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()), RANK="0", WORLD_SIZE="1")
        os.environ.setdefault("LOCAL_RANK", "0")
        return main(argv)
    args.device = "cpu"
    try:
        run_gloo(_spawned, n, args, timeout=24 * 3600, threads=None)
    except RuntimeError as e:  # a rank failed: its first line, not every rank's traceback
        print(f"{cli.prog}: error: {str(e).splitlines()[0] if str(e) else type(e).__name__}", file=sys.stderr)
        raise SystemExit(1) from None
