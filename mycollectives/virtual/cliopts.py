"""The launcher's flags: torchrun's, and the virtual cluster's (what :func:`~mycollectives.virtual.run` takes)."""

from __future__ import annotations

import argparse

from ..cliargs import finite
from ..topology.nodes import NODES, node_spec


def _pair(text: str, what: str) -> tuple[str, float]:
    key, sep, value = text.rpartition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{what}: expected KEY=FACTOR, got {text!r}")
    try:
        return key, float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{what}: the factor in {text!r} must be a number") from None


def _slow(text: str) -> tuple[int, float]:
    key, factor = _pair(text, "--slow")
    if not key.isdigit():
        raise argparse.ArgumentTypeError(f"--slow: expected RANK=FACTOR, got {text!r}")
    return int(key), factor


def _vertex(x: str) -> int | str:
    return int(x) if x.isdigit() else x


def _degrade(text: str) -> tuple[object, float]:
    key, factor = _pair(text, "--degrade")
    parts = key.split(",")
    if len(parts) == 2 and all(parts):
        return (_vertex(parts[0]), _vertex(parts[1])), factor
    if len(parts) == 1 and key.isdigit():
        return int(key), factor
    raise argparse.ArgumentTypeError(f"--degrade: expected LINK=FACTOR or U,V=FACTOR, got {text!r}")


def add_options(p: argparse.ArgumentParser) -> None:
    """torchrun's flags (rendezvous ones accepted, meaning nothing here) and the cluster's."""
    t = p.add_argument_group("torchrun's flags")
    t.add_argument("--nnodes", default="1", help="nodes of the virtual cluster (default 1)")
    t.add_argument(
        "--nproc-per-node",
        "--nproc_per_node",
        dest="nproc_per_node",
        default="gpu",
        help="ranks per node: a number, or 'gpu' (default): every GPU of the node",
    )
    for flag in ("--node-rank", "--rdzv-backend", "--rdzv-endpoint", "--rdzv-id", "--max-restarts"):
        t.add_argument(flag, "--" + flag[2:].replace("-", "_"), default=None, help=argparse.SUPPRESS)
    t.add_argument("--master-addr", "--master_addr", dest="master_addr", default="127.0.0.1")
    t.add_argument("--master-port", "--master_port", dest="master_port", type=int, default=29500)
    t.add_argument("--standalone", action="store_true", help="accepted, as torchrun's (one job, here)")
    c = p.add_argument_group("the virtual cluster")
    c.add_argument(
        "--cluster", default="dgx_h100", help=f"the node kind, one of {', '.join(NODES)} (default dgx_h100)"
    )
    c.add_argument("--nics-per-node", type=int, default=None, help="NICs per node (default: the node's own)")
    c.add_argument("--nic", default=None, help="the NIC kind: hdr, ndr, xdr (default: the node's own)")
    c.add_argument("--fabric", default="rail", choices=("rail", "fat_tree"), help="the network between nodes")
    c.add_argument(
        "--nodes-per-leaf", type=int, default=16, help="with --fabric fat_tree: nodes per leaf switch"
    )
    c.add_argument("--oversubscription", type=float, default=1.0, help="leaf-to-spine oversubscription")
    c.add_argument("--protocol", default="simple", choices=("simple", "ll128", "ll"), help="NCCL's protocol")
    c.add_argument(
        "--slow", type=_slow, action="append", default=[], metavar="RANK=FACTOR", help="a straggler"
    )
    c.add_argument(
        "--degrade", type=_degrade, action="append", default=[], metavar="LINK=F|U,V=F", help="slow links"
    )
    c.add_argument("--timeout", type=float, default=None, help="wall-clock seconds before giving up")
    o = p.add_argument_group("output")
    o.add_argument(
        "--trace", default=None, metavar="FILE", help="write a Chrome trace / Perfetto JSON timeline"
    )
    o.add_argument("--quiet", action="store_true", help="no table at the end")
    o.add_argument(
        "--flight-dir", default=None, metavar="DIR", help="keep the flight records of a failed run here"
    )


def _count(text: str, flag: str, default: int | None = None) -> int:
    if default is not None and text in ("gpu", "auto"):
        return default
    if not text.lstrip("-").isdigit():
        raise ValueError(f"{flag} must be a whole number, got {text!r}")
    n = int(text)
    if n <= 0:
        raise ValueError(f"{flag} must be at least 1, got {n}")
    return n


def cluster_kwargs(a: argparse.Namespace) -> tuple[dict, int, int]:
    """``(keywords, nnodes, nproc)``: keywords for the run (``cluster``: the topology's; ``degrade``)."""
    if a.cluster not in NODES:
        raise ValueError(f"unknown cluster {a.cluster!r}; expected one of {', '.join(NODES)}")
    gpus = node_spec(a.cluster).gpus
    nnodes = _count(a.nnodes, "--nnodes")
    nproc = _count(a.nproc_per_node, "--nproc-per-node", gpus)
    if nproc > gpus:
        raise ValueError(f"--nproc-per-node {nproc}: a {a.cluster} node has {gpus} GPUs")
    if a.node_rank not in (None, "0"):
        raise ValueError("--node-rank: the virtual cluster runs every node in this process; leave it out")
    cluster = dict(fabric=a.fabric, nodes_per_leaf=a.nodes_per_leaf, oversubscription=a.oversubscription)
    cluster |= {k: v for k, v in (("nics_per_node", a.nics_per_node), ("nic", a.nic)) if v is not None}
    if nproc != gpus:
        cluster["gpus_per_node"] = nproc
    for rank, factor in a.slow:
        if rank >= nnodes * nproc or not factor > 0:
            raise ValueError(
                f"--slow {rank}={factor:g}: expected a rank below {nnodes * nproc} and a factor > 0"
            )
    if a.timeout is not None:
        finite(a.timeout, "--timeout", above=0)
    if not 0 < int(a.master_port) < 65536:
        raise ValueError(f"--master-port {a.master_port}: expected a TCP port, 1 to 65535")
    kw = dict(cluster=cluster, protocol=a.protocol, slow=dict(a.slow), timeout=a.timeout)
    if a.degrade:
        kw["degrade"] = dict(a.degrade)
    return kw, nnodes, nproc
