"""Check functions for the exercises of chapter 4 (Topology).

Each ``check_*`` raises ``AssertionError`` with a message that says what is
wrong, or prints what was right. The expected values come from the package
itself (the simulator, the topology presets, NCCL's model in
``mycollectives.nccl``), so the notebook shows the question and not the
answer.

``check_hierarchical_all_reduce`` wraps the shared harness
(``mycollectives.exercises.check_collective``) to hand the reader's
function the node size, and adds a check of its own: only node leaders may
send between nodes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch

from ..nccl.constants import BASE_LATENCY, HW_LATENCY
from ..nccl.model import latency
from ..sim import simulate
from ..sim.nccl import choose
from ..sim.nccl import system as nccl_system
from ..topology import Topology, cluster, dgx_h100

GIB = 1 << 30


def _need(answer: object, what: str) -> None:
    assert answer is not None, f"replace None with your answer: {what}"


def _close(answer: float | None, want: float, what: str, unit: str = "", rel: float = 0.02) -> None:
    _need(answer, what)
    got = float(answer)
    assert math.isclose(got, want, rel_tol=rel), (
        f"{what}: got {got:.4g}{unit}, which is off by {100 * (got / want - 1):+.1f}% from the expected value"
    )
    print(f"Correct: {what} = {got:.4g}{unit}")


# --- exercise: hierarchical all-reduce from send/recv ---------------------------------


def _leaders_only(fn: Callable, world_size: int, local_size: int, count: int = 12) -> None:
    """Run ``fn`` once on a traced local world; every message between two nodes
    must go from a node leader (local rank 0) to another node leader."""
    from ..transport import LocalWorld

    world = LocalWorld(world_size, timeout=5.0, eager_bytes=0)

    def body(rank: int) -> None:
        t = torch.arange(count, dtype=torch.float32) + 100.0 * rank
        fn(t, local_size)

    world.run(body)
    for ev in world.trace:
        if ev.src // local_size == ev.dst // local_size or ev.nbytes == 0:
            continue
        assert ev.src % local_size == 0 and ev.dst % local_size == 0, (
            f"world size {world_size}, local_size {local_size}: rank {ev.src} (node {ev.src // local_size}, "
            f"local rank {ev.src % local_size}) sent {ev.nbytes} bytes to rank {ev.dst} (node "
            f"{ev.dst // local_size}, local rank {ev.dst % local_size}); between nodes only the leaders "
            "(local rank 0) may talk: reduce to your node's leader first, and broadcast from it at the end"
        )


def check_hierarchical_all_reduce(
    fn: Callable[[torch.Tensor, int], None],
    local_size: int = 4,
    world_sizes: Sequence[int] = (4, 8, 12),
    **kwargs,
) -> int:
    """Chapter 4: ``fn(tensor, local_size)`` is a correct leader-based hierarchical all-reduce.

    Runs the shared harness on every world size (``local_size`` ranks per
    node, so world size 4 is one node and 12 is three), then checks on a
    traced run of two nodes that only node leaders send between nodes.
    Returns the number of cases passed.
    """
    from . import check_collective  # the shared harness

    sizes = tuple(p for p in world_sizes if p % local_size == 0)
    assert sizes, f"no world size in {tuple(world_sizes)} is a multiple of local_size={local_size}"
    # int64 first: its wrong sums are decoded exactly ("missing ranks 4, 5, 6, 7")
    kwargs.setdefault("dtypes", (torch.int64, torch.float32))
    passed = check_collective(lambda t: fn(t, local_size), "all_reduce", world_sizes=sizes, **kwargs)
    _leaders_only(fn, 2 * local_size, local_size)
    print(f"Correct: only node leaders sent between nodes ({2 * local_size} ranks, {local_size} per node)")
    return passed


# --- exercise: ring against hierarchical across the slow link ---------------------------


def ring_vs_hierarchical(nbytes: int = GIB, nodes: int = 2) -> tuple[float, float]:
    """Bandwidth-only times (seconds) of the flat ring and of ``hierarchical`` on ``nodes`` DGX H100s."""
    topo = cluster("dgx_h100", nodes)
    ring = simulate("all_reduce", "ring", nbytes, topo, protocol="ideal")
    hier = simulate("all_reduce", "hierarchical", nbytes, topo, protocol="ideal")
    return ring.time_s, hier.time_s


def check_ring_vs_hierarchical(
    t_ring: float | None, t_hier: float | None, nbytes: int = GIB, nodes: int = 2
) -> None:
    """Chapter 4: both all-reduce times, bandwidth terms only, against the simulator."""
    want_ring, want_hier = ring_vs_hierarchical(nbytes, nodes)
    _need(t_ring, "t_ring")
    _need(t_hier, "t_hier")
    if math.isclose(float(t_ring), want_hier, rel_tol=0.02) and math.isclose(
        float(t_hier), want_ring, rel_tol=0.02
    ):
        raise AssertionError("t_ring and t_hier are swapped")
    ring_msg = (
        "the ring's 2(p-1) steps each move n/p bytes, and every step waits for the step's slowest link: "
        "which link is that?"
    )
    hier_msg = (
        "three phases one after another: reduce-scatter inside the node, an all-reduce of n/L bytes "
        "across the nodes (one per rail), all-gather inside the node"
    )
    for got, want, name, hint in (
        (t_ring, want_ring, "t_ring", ring_msg),
        (t_hier, want_hier, "t_hier", hier_msg),
    ):
        got = float(got)
        assert math.isclose(got, want, rel_tol=0.02), (
            f"{name}: got {1e3 * got:.3f} ms, off by {100 * (got / want - 1):+.1f}% from the simulator; {hint}"
        )
    print(
        f"Correct: ring {1e3 * want_ring:.2f} ms, hierarchical {1e3 * want_hier:.2f} ms "
        f"({want_ring / want_hier:.1f}x faster)"
    )


# --- exercise: bytes per GPU on the network ---------------------------------------------


def inter_node_bytes(nbytes: int = GIB, nodes: int = 4) -> float:
    """Bytes the busiest GPU sends into its NIC during ``hierarchical`` on ``nodes`` DGX H100s."""
    topo = cluster("dgx_h100", nodes)
    r = simulate("all_reduce", "hierarchical", nbytes, topo)
    kinds = topo.kinds
    to_nic = [
        k
        for k in range(topo.num_links)
        if kinds[topo.link_src[k]] == "gpu" and kinds[topo.link_dst[k]] == "nic"
    ]
    return float(r.link_bytes[to_nic].max())


def check_inter_node_bytes(answer: float | None, nbytes: int = GIB, nodes: int = 4) -> None:
    """Chapter 4: bytes one GPU sends over the network in the hierarchical all-reduce."""
    want = inter_node_bytes(nbytes, nodes)
    _need(answer, "bytes per GPU on the network")
    flat = 2 * (nodes - 1) / nodes * nbytes
    assert not math.isclose(float(answer), flat, rel_tol=0.02), (
        f"{answer:.4g} bytes is what a rank would send if it ran the all-reduce of the WHOLE vector across "
        "the nodes; after the reduce-scatter inside the node, each GPU carries only its own 1/L of it"
    )
    _close(answer, want, "bytes per GPU into the network", " B")


# --- exercise: latency of a ring at scale ------------------------------------------------


def ring_latency(nodes: int = 512, local: int = 8, protocol: str = "Simple") -> float:
    """NCCL's latency (seconds) of a ring all-reduce over ``nodes`` DGX H100s of ``local`` GPUs."""
    s = nccl_system(cluster("dgx_h100", nodes), nodes * local)
    return latency(s, "all_reduce", "Ring", protocol) * 1e-6  # NCCL's model works in microseconds


def check_ring_latency(
    answer: float | None, nodes: int = 512, local: int = 8, protocol: str = "Simple"
) -> None:
    """Chapter 4: NCCL's ring latency at scale: base + intra-node steps x NVLink + network steps x network."""
    want = ring_latency(nodes, local, protocol)
    _need(answer, "ring latency")
    got, p = float(answer), nodes * local
    base = BASE_LATENCY["Ring"][protocol] * 1e-6
    intra, inter = (HW_LATENCY[hw]["Ring"][protocol] * 1e-6 for hw in ("NVLink", "NET"))
    steps, net_steps = 2 * (p - 1), 2 * (nodes - 1)
    if math.isclose(got, base + steps * inter, rel_tol=0.01):
        raise AssertionError(
            f"only {net_steps} of the {steps} steps cross the network: the others go over NVLink "
            "(NCCL charges each step the latency of the link it crosses)"
        )
    if math.isclose(got, steps * (base + inter), rel_tol=0.01) or math.isclose(
        got, steps * inter, rel_tol=0.01
    ):
        raise AssertionError(
            "the base latency is paid once per collective, and most steps stay inside a node"
        )
    _close(got * 1e3, want * 1e3, f"NCCL's latency of a {p}-rank ring all-reduce", " ms", rel=0.01)


# --- exercise: pick NCCL's protocol ------------------------------------------------------


def _sizes() -> list[int]:
    return [1 << k for k in range(3, 31, 2)]  # 8 B .. 512 MiB


def check_protocol_choice(fn: Callable[[int], str], topology: Topology | None = None) -> None:
    """Chapter 4: ``fn(nbytes)`` picks the protocol NCCL's model picks for a ring all-reduce.

    Compared at sizes 8 B .. 512 MiB on a DGX H100 (by default) with NCCL's
    own formulas (:mod:`mycollectives.nccl.model`); a size where the two best
    protocols are within 2 % of each other accepts either.
    """
    topo = topology or dgx_h100()
    for n in _sizes():
        got = fn(n)
        assert isinstance(got, str), (
            f"fn({n}) returned {got!r}; return a protocol name: 'Simple', 'LL128' or 'LL'"
        )
        best, table = choose("all_reduce", n, topo, algorithms=["Ring"])[1:]
        t = {proto: table["Ring", proto] for _, proto in table}
        names = {k.lower(): k for k in t}
        assert got.lower() in names, f"fn({n}) returned {got!r}; expected one of {tuple(t)}"
        if t[names[got.lower()]] <= t[best] * 1.02:
            continue
        shown = ", ".join(f"{k} {1e6 * v:.1f} us" for k, v in t.items())
        raise AssertionError(
            f"at {n} bytes you picked {got!r}, but {best!r} is faster ({shown}): time = latency + n / bandwidth, "
            "with each protocol's factor and ceiling applied to the bus bandwidth before dividing by 2(p-1)/p"
        )
    print(
        f"Correct: your choice matches NCCL's model at every size from {_sizes()[0]} B to {_sizes()[-1] >> 20} MiB"
    )


__all__ = [
    "check_hierarchical_all_reduce",
    "check_inter_node_bytes",
    "check_protocol_choice",
    "check_ring_latency",
    "check_ring_vs_hierarchical",
    "inter_node_bytes",
    "ring_latency",
    "ring_vs_hierarchical",
]
