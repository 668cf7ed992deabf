"""``python -m mycollectives.bench --virtual dgx_h100 --nodes 2``: nccl-tests on a virtual cluster.

Every rank of :func:`mycollectives.virtual.run` runs the sweep: for each size
and algorithm, ``-w`` untimed calls, then ``-n`` timed ones; a call's time is
the rank's virtual clock over the loop divided by ``-n``, and the row shows
the slowest rank's, as the bench does with processes. ``native`` means what
NCCL would run there (``algorithm="auto"`` inside a virtual run:
:mod:`mycollectives.virtual.tuning`; no column for a collective NCCL lacks); the
package's algorithms run by name.
The table is labelled with the cluster, and NCCL's choice of each size is
printed under it.

``--data 0`` (the default) runs data-free (:mod:`mycollectives.datafree`):
buffers are meta tensors, so 8 GiB on thousands of ranks needs no memory, and
the messages are the same, so the times are too; ``--data 1`` moves real
bytes, and ``-c 1`` then checks them.
"""

from __future__ import annotations

import functools
import sys
import time

import torch

from .. import api
from ..cliargs import Parser, Refusal, integer, switch
from ..collectives import record
from ..timing import now
from .cases import NATIVE, pattern
from .factors import DTYPES, TYPE_NAMES, bandwidths
from .runner import Result

_OPS = {"sum": "SUM", "prod": "PRODUCT", "min": "MIN", "max": "MAX", "avg": "AVG"}


def add_flags(p: Parser) -> None:
    """The virtual cluster's flags (:func:`mycollectives.virtual.run`'s options)."""
    a = p.add_argument
    a("--virtual", metavar="NODE", help="run on a virtual cluster of this node kind (e.g. dgx_h100)")
    a("--nodes", type=integer(1), default=1, help="nodes of the virtual cluster (default 1)")
    a("--nics-per-node", type=integer(1), default=None, help="NICs per node (default: the node's)")
    a("--nic", default=None, help="NIC kind (default: the node's)")
    a("--fabric", default="rail", help="network between nodes (default rail)")
    a("--sharp", type=switch, default=0, help="1: in-network reduction (SHARP), so NCCL may run CollNet")
    a("--data", type=switch, default=0, help="1: move real bytes; 0: data-free, meta tensors (default)")


def cluster_options(args) -> dict:
    kw = {"fabric": args.fabric, "sharp": bool(args.sharp)}
    if args.nics_per_node is not None:
        kw["nics_per_node"] = args.nics_per_node
    if args.nic is not None:
        kw["nic"] = args.nic
    return kw


def _buffers(c, spec, rank: int, dtype, device):
    numel = lambda pieces: sum(n for _, _, n in pieces)  # noqa: E731
    inp = torch.zeros(numel(c.input_at(spec, rank)), dtype=dtype, device=device)
    out = inp if c.in_place else torch.zeros(numel(c.output_at(spec, rank)), dtype=dtype, device=device)
    return inp, out


def _wrong(c, spec, rank, inp, out, call, redop, dtype) -> int:
    """nccl-tests' #wrong on this rank (real data only)."""
    from ..collectives import numpy_reduce

    ins = [
        pattern(k, inp.numel(), dtype, "cpu") if c.has_input(spec, k) else None
        for k in range(spec.world_size)
    ]
    if ins[rank] is not None:
        inp.copy_(ins[rank])
    call()
    if not c.has_output(spec, rank):
        return 0
    want = c.oracle(spec, [x.double().numpy() if x is not None else None for x in ins], numpy_reduce(redop))
    return int((out != torch.from_numpy(want[rank]).to(dtype)).sum())


def sweep(rank: int, collective: str, sizes, algorithms, args) -> dict:
    """One rank's part: ``{(size, algorithm): (seconds per call, wrong)}``."""
    c, dtype = record(collective), DTYPES[args.datatype]
    device = "cpu" if args.data else "meta"
    op = getattr(api.ReduceOp, _OPS[args.op]) if c.reducing else None
    out: dict = {}
    for size in sizes:
        spec = c.spec(args.world, size, dtype.itemsize, **({"root": args.root} if c.rooted else {}))
        inp, res = _buffers(c, spec, rank, dtype, device)
        for a in algorithms:
            kw = {"algorithm": "auto" if a == NATIVE else a, "check": bool(args.arg_check)}
            call = functools.partial(c.call, api, inp, res, op, args.root, None, rank, spec=spec, **kw)
            wrong = (
                _wrong(c, spec, rank, inp, res, call, args.op, dtype) if args.check and args.data else None
            )
            for _ in range(args.warmup_iters):
                call()
            api.barrier(check=False)
            t0 = now()
            for _ in range(args.iters):
                call()
            out[c.size(spec, dtype.itemsize), a] = ((now() - t0) / args.iters, wrong)
    return out


def results(per_rank: list[dict], collective: str, args) -> list[Result]:
    """The rows: each (size, algorithm) at its slowest rank's time."""
    c, dtype = record(collective), DTYPES[args.datatype]
    rows = []
    for (size, a), _ in per_rank[0].items():
        sec = max(r[size, a][0] for r in per_rank)
        wrongs = [r[size, a][1] for r in per_rank]
        wrong = None if wrongs[0] is None else sum(wrongs)
        algbw, busbw = bandwidths(collective, size, sec, args.world)
        redop, root = (args.op if c.reducing else "none"), (args.root if c.rooted else -1)
        rows.append(
            Result(collective, a, size, size // dtype.itemsize, TYPE_NAMES.get(dtype, str(dtype)), redop,
                   root, args.world, sec * 1e6, algbw, busbw, wrong, [sec * 1e6], [])
        )  # fmt: skip
    return rows


def choices(run, sizes: list[int]) -> list[str]:
    """NCCL's choice of each size, as the run recorded it (the world's calls, the first of each size)."""
    seen: dict = {}
    for call in run.calls:
        if len(call.gpus) == len(run.clocks) and call.collective != "barrier":
            seen.setdefault(call.nbytes, call)
    lines = ["#       size  NCCL 2.30.7's choice       channels           schedule run          priced by"]
    for size, call in sorted(seen.items()):
        ch = call.choice
        lines.append(
            f"# {size:10d}  {ch.algorithm + '/' + ch.protocol:<25s} {ch.channels:8d}"
            f"{'' if call.channels_run == ch.channels else f' (ran {call.channels_run})':>9s}  "
            f"{ch.schedule + ('' if ch.exact else ' (nearest)'):<20s}  {call.priced}"
        )
    return lines


def main(args, algorithms: list[str], sizes: list[int]) -> list[Result]:
    """Run the sweep on the virtual cluster and print nccl-tests' table, labelled as modelled."""
    from .. import virtual
    from . import report

    topo = virtual.topology_of(args.virtual, args.nodes, **cluster_options(args))
    args.world = topo.num_gpus
    if args.root >= args.world:
        raise Refusal(f"-r/--root: expected a rank from 0 to {args.world - 1}, got {args.root}")
    if args.check and not args.data:
        args.check = 0  # data-free: nothing to check
    t0 = time.perf_counter()
    run = virtual.run(sweep, topo, args=(args.collective, sizes, algorithms, args), data=bool(args.data))
    wall = time.perf_counter() - t0
    rows = results(run.results, args.collective, args)
    print(f"# mycollectives.bench {args.collective} on a virtual cluster: {topo.name}, {args.world} ranks "
          f"({args.nodes} x {args.virtual}); data {'moved' if args.data else 'free (meta tensors)'}; "
          f"warmup iters: {args.warmup_iters} iters: {args.iters}")  # fmt: skip
    print(f"# times are virtual time on {args.virtual} x{args.nodes} (modelled, not measured); "
          f"'native' is what NCCL 2.30.7 would run")  # fmt: skip
    print(report.header(algorithms))
    for size in dict.fromkeys(r.size for r in rows):
        print(report.row([r for r in rows if r.size == size], algorithms))
    print(report.footer(rows, algorithms))
    print("\n".join(choices(run, sizes)))
    print(f"# wall time {wall:.1f} s for {run.stats['flows']} flows")
    return rows


# flags only a sweep on real processes reads: with --virtual, a value other than the default is refused
_REAL_ONLY = ("nprocs", "device", "threads", "transport", "calibrate", "csv", "json", "plot")


def check_virtual(cli, args) -> None:
    """The node kind, and no flag that only a sweep on real processes reads."""
    from ..topology.nodes import NODES

    if args.virtual not in NODES:
        raise Refusal(f"--virtual: unknown node {args.virtual!r}; expected one of {', '.join(NODES)}")
    given = [k for k in _REAL_ONLY if getattr(args, k) != cli.get_default(k)]
    if given:
        flags = ", ".join("--" + k.replace("_", "-") for k in given)
        raise Refusal(
            f"{flags}: not read with --virtual (the ranks are --nodes x the node's GPUs); leave out"
        )


def cli_main(cli, args) -> list[Result]:
    """``--virtual``: check the flags as the bench does, then :func:`main`."""
    from .flags import algorithm_list, check_counts, check_op, check_sizes

    try:
        check_virtual(cli, args)
        check_counts(args)
        check_op(args)
        sizes = check_sizes(args)
        algorithms = algorithm_list(args.algorithm, args.collective)
        if not record(args.collective).in_torch:  # NCCL has none to run: no native column, as under gloo
            algorithms = [a for a in algorithms if a != NATIVE]
        elif "auto" in algorithms and NATIVE in algorithms:  # inside a virtual run they are the same
            algorithms.remove("auto")
        if not algorithms:
            raise Refusal(f"--algorithm: {args.collective} has no native one; name one of the package's")
        from .. import virtual

        virtual.topology_of(args.virtual, args.nodes, **cluster_options(args))
    except Refusal as r:
        print(f"{cli.prog}: error: {r}", file=sys.stderr)
        raise
    except ValueError as e:  # a cluster option the topology refuses
        print(f"{cli.prog}: error: {e}", file=sys.stderr)
        raise Refusal(str(e)) from None
    return main(args, algorithms, sizes)
