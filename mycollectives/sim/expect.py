"""What busbw should my cluster give? The calculator of chapter 4, "What a cluster should give".

    python -m mycollectives.sim.expect --node dgx_h100 --nodes 4 --nics-per-node 8 --nic ndr -C all_reduce -b 8G

builds the cluster (:func:`~mycollectives.topology.presets.cluster`), asks NCCL's model
which algorithm and protocol NCCL would run (:func:`mycollectives.sim.nccl.choose`;
``--algorithm`` and ``--protocol`` force them, as ``NCCL_ALGO`` and
``NCCL_PROTO`` do), simulates it channel by channel
(:func:`~mycollectives.sim.simulate_nccl`) and prints the time, algbw and
busbw in nccl-tests' terms, and the busbw the links alone allow. Sizes and
collective names are nccl-tests' (``8G``, ``all_reduce``, ``alltoall``). The
last line always reads ``busbw: X GB/s``: scripts read it (a sweep with
``-e`` ends on its largest size). A flag it cannot use (a count below 1, a
size of 0 bytes, more than ``MAX_NODES`` nodes, an oversubscription that is
not a finite number from 1 up, an algorithm NCCL does not run for the
collective) is refused in one line, exit status 2 (``mycollectives.cliargs``).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from ..bench.factors import parse_size, sizes
from ..cliargs import Parser, integer, number
from ..collectives import canonical
from ..topology import NICS, NODES, Topology, cluster
from .nccl import choose, nccl_name, simulate_nccl
from .result import SimResult

_NCCL_TESTS = {"allreduce": "all_reduce", "allgather": "all_gather", "reducescatter": "reduce_scatter",
               "alltoall": "all_to_all", "bcast": "broadcast"}  # fmt: skip
# the collectives NCCL's model prices
PREDICTED = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all")
MAX_NODES = 4096  # the calculator's bound (32768 GPUs of 8 per node: about 20 s and 350 MB)


def collective_name(text: str) -> str:
    """nccl-tests' names (``all_reduce``, ``alltoall``, ``all_reduce_perf``) to the package's."""
    name = text.lower().removesuffix("_perf")
    name = _NCCL_TESTS.get(name.replace("_", ""), name)
    c = canonical(name)
    if c not in PREDICTED:
        raise ValueError(f"collective {text!r}: expected one of {PREDICTED}")
    return c


@dataclass(frozen=True)
class Expectation:
    """One prediction: the cluster, what NCCL would run, and the simulated result."""

    topology: Topology
    algorithm: str
    protocol: str
    forced: bool
    nccl_estimate_s: float  # NCCL's own model's time for its choice (nan for all-to-all)
    result: SimResult

    @property
    def busbw(self) -> float:
        return self.result.busbw


def expect(
    collective: str = "all_reduce",
    nbytes: int | str = "8G",
    node: str = "dgx_h100",
    nodes: int = 1,
    nics_per_node: int | None = None,
    nic: str | None = None,
    algorithm: str | None = None,
    protocol: str | None = None,
    gpus: int | None = None,
    **cluster_options,
) -> Expectation:
    """The busbw NCCL should reach for ``collective`` of ``nbytes`` on ``nodes`` x ``node``.

    >>> e = expect("all_reduce", "8G", "dgx_h100", nodes=4)
    >>> e.algorithm, e.protocol, 350 < e.busbw < 380
    ('Ring', 'Simple', True)
    """
    c, n = collective_name(collective), parse_size(nbytes)
    if n < 1:
        raise ValueError(f"size: expected at least 1 byte, got {n}")
    if not 1 <= nodes <= MAX_NODES:
        raise ValueError(f"nodes: expected from 1 to {MAX_NODES}, got {nodes}")
    topo = cluster(node, nodes, nics_per_node=nics_per_node, nic=nic, **cluster_options)
    algos = [algorithm] if algorithm else None
    protos = [protocol] if protocol else None
    a, p, table = choose(c, n, topo, gpus, algos, protos)
    for flag, forced, ran in (("algorithm", algorithm, a), ("protocol", protocol, p)):
        if forced and nccl_name(forced) != ran:  # NCCL has no such choice for this collective
            raise ValueError(f"{flag} {forced!r}: NCCL does not run it for {c}; it runs {a} / {p}")
    result = simulate_nccl(c, a, n, topo, protocol=p, world_size=gpus)
    return Expectation(topo, a, p, bool(algorithm or protocol), table.get((a, p), float("nan")), result)


def _fmt_time(t: float) -> str:
    return f"{t * 1e3:.3f} ms" if t >= 1e-3 else f"{t * 1e6:.1f} us"


def report(e: Expectation) -> list[str]:
    """The lines the command prints for one size; the last is ``busbw: X GB/s``."""
    r, t = e.result, e.topology
    names = t.names
    k = int(r.round_busiest[0])
    busiest = f"{names[t.link_src[k]]} -> {names[t.link_dst[k]]}" if k >= 0 else "none"
    how = "forced" if e.forced else "NCCL would run"
    estimate = (
        f"; NCCL's own estimate {_fmt_time(e.nccl_estimate_s)}"
        if e.nccl_estimate_s == e.nccl_estimate_s
        else ""
    )
    return [
        f"size: {r.nbytes} bytes, {r.collective} on {r.world_size} GPUs",
        f"{how}: {e.algorithm} / {e.protocol}, {r.channels} channels{estimate}",
        f"time: {_fmt_time(r.time_s)} (latency {_fmt_time(r.latency_s)}, busiest link {busiest})",
        f"algbw: {r.algbw:.1f} GB/s",
        f"link-by-link bound: {r.bound_busbw:.1f} GB/s busbw (line rates, no protocol, no latency)",
        f"busbw: {r.busbw:.1f} GB/s",
    ]


def parser() -> Parser:
    p = Parser(prog="python -m mycollectives.sim.expect", description=__doc__.splitlines()[0])
    a = p.add_argument
    a(
        "--node",
        default="dgx_h100",
        choices=tuple(NODES),
        help="the node (an NVLink domain; default dgx_h100)",
    )
    a(
        "--nodes",
        type=integer(1, MAX_NODES),
        default=1,
        help=f"number of nodes, up to {MAX_NODES} (default 1)",
    )
    a("--nics-per-node", type=integer(1), default=None, help="NICs per node (default: one per GPU)")
    a("--nic", default=None, choices=tuple(NICS), help="NIC rate: hdr, ndr or xdr (default: the node's)")
    a(
        "-C",
        "--collective",
        default="all_reduce",
        help="nccl-tests' name, e.g. all_reduce, all_gather, alltoall",
    )
    a("-b", "--minbytes", default="8G", help="size, nccl-tests' syntax: 8, 64K, 16M, 8G (default 8G)")
    a("-e", "--maxbytes", default=None, help="largest size of a sweep (default: -b only)")
    a(
        "-f",
        "--stepfactor",
        type=integer(2),
        default=2,
        help="multiply the size by this in a sweep (default 2)",
    )
    a("--algorithm", default=None, help="force one of NCCL's algorithms (Ring, Tree, NVLS, NVLSTree, ...)")
    a("--protocol", default=None, help="force a protocol (LL, LL128, Simple)")
    a("--gpus", type=integer(1), default=None, help="ranks (default: every GPU of the cluster)")
    a("--fabric", default="rail", choices=("rail", "fat_tree"), help="rail-optimised (default) or fat tree")
    a("--oversubscription", type=number(1.0), default=1.0, help="spine oversubscription, e.g. 2 for 2:1")
    a("--no-nvls", action="store_true", help="NVLink SHARP off (NCCL_NVLS_ENABLE=0)")
    a("--sharp", action="store_true", help="SHARP in the network switches (NCCL's CollNet)")
    a(
        "--gpus-per-node",
        type=integer(1),
        default=None,
        help="use part of each NVLink domain (an NVL72 partition)",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    cli = parser()
    args = cli.parse_args(argv)
    try:
        lo = parse_size(args.minbytes)
        todo = sizes(lo, parse_size(args.maxbytes), args.stepfactor) if args.maxbytes else [lo]
        options = dict(fabric=args.fabric, oversubscription=args.oversubscription, sharp=args.sharp,
                       gpus_per_node=args.gpus_per_node, nvls=False if args.no_nvls else None)  # fmt: skip
        results = [
            expect(args.collective, n, args.node, args.nodes, args.nics_per_node, args.nic, args.algorithm,
                   args.protocol, args.gpus, **options)
            for n in todo
        ]  # fmt: skip
    except ValueError as err:
        print(f"{cli.prog}: error: {err}", file=sys.stderr)
        return 2
    t = results[0].topology
    nic = f", {t.nics_per_node} x {t.nic.name.upper()} NICs per node" if t.nic else ""
    print(f"cluster: {t.num_nodes} x {args.node} ({t.gpus_per_node} GPUs each){nic}; NCCL 2.30.7's model")
    if len(results) > 1:
        print(f"{'size (B)':>14} {'algorithm':>10} {'protocol':>8} {'time':>12} {'algbw':>8} {'busbw':>8}")
        for e in results[:-1]:
            r = e.result
            print(f"{r.nbytes:14d} {e.algorithm:>10} {e.protocol:>8} {_fmt_time(r.time_s):>12} "
                  f"{r.algbw:8.1f} {r.busbw:8.1f}")  # fmt: skip
    print("\n".join(report(results[-1])))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
