"""Check functions for the exercises of chapter 4 (Topology): the hierarchy of links.

Each ``check_*`` raises ``AssertionError`` with a message that says what is wrong, or prints
what was right, and returns nothing; it never prints success before a failure. The expected
values come from the package itself (the simulator, the topology presets, the schedules), so
the notebook shows the question and not the answer. The exercises on NCCL's cost model are in
:mod:`mycollectives.book.exercises.nccl_model`.

``check_hierarchical_all_reduce`` wraps the shared harness (``check_collective``) to hand the
reader's function the node size, and adds a rule of its own: only node leaders send between nodes.
"""

from __future__ import annotations

import contextlib
import io
import math
from collections.abc import Callable, Mapping, Sequence

import torch

from ...sim import simulate
from ...topology import NET, NVLINK, cluster
from .algorithms import network_bytes
from .answers import close, exercise, need, off

GIB = 1 << 30


# --- exercise: hierarchical all-reduce from send/recv ---------------------------------


def _leaders_only(fn: Callable, world_size: int, local_size: int, count: int = 12) -> None:
    """Run ``fn`` once on a traced local world; every message between two nodes
    must go from a node leader (local rank 0) to another node leader."""
    from ...transport import LocalWorld

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


@exercise
def check_hierarchical_all_reduce(
    fn: Callable[[torch.Tensor, int], None],
    local_size: int = 4,
    world_sizes: Sequence[int] = (4, 8, 12),
    **kwargs,
) -> None:
    """Chapter 4: ``fn(tensor, local_size)`` is a correct leader-based hierarchical all-reduce.

    Runs the shared harness on every world size (``local_size`` ranks per
    node, so world size 4 is one node and 12 is three), then checks on a
    traced run of two nodes that only node leaders send between nodes. The
    harness's verdict is printed only once both have passed.
    """
    from . import check_collective  # the shared harness

    sizes = tuple(p for p in world_sizes if p % local_size == 0)
    assert sizes, f"no world size in {tuple(world_sizes)} is a multiple of local_size={local_size}"
    # int64 first: its wrong sums are decoded exactly ("missing ranks 4, 5, 6, 7")
    kwargs.setdefault("dtypes", (torch.int64, torch.float32))
    verdict = io.StringIO()
    with contextlib.redirect_stdout(verdict):
        check_collective(lambda t: fn(t, local_size), "all_reduce", world_sizes=sizes, **kwargs)
    _leaders_only(fn, 2 * local_size, local_size)
    print(verdict.getvalue().strip())
    print(f"Correct: only node leaders sent between nodes ({2 * local_size} ranks, {local_size} per node)")


# --- design problem: ring against hierarchical across the slow link ---------------------


def _rates(topo) -> tuple[float, float]:
    """Usable bytes/s of an NVLink hop and of a network hop of ``topo``."""
    return float(topo.link_bw[topo.link_class == NVLINK][0]), float(
        topo.link_bw[topo.link_class == NET].min()
    )


def ring_vs_hierarchical(nbytes: int = GIB, nodes: int = 2) -> tuple[float, float]:
    """Bandwidth-only times (seconds) of the flat ring and of ``hierarchical`` on ``nodes`` DGX H100s."""
    topo = cluster("dgx_h100", nodes)
    ring = simulate("all_reduce", "ring", nbytes, topo, protocol="ideal")
    hier = simulate("all_reduce", "hierarchical", nbytes, topo, protocol="ideal")
    return ring.time_s, hier.time_s


def _ring_rate_hint(got: float, nbytes: int, topo) -> str:
    """What a wrong ring time says about the rate it was divided by: the link, or the link's rate."""
    p = topo.num_gpus
    nv, net = _rates(topo)
    line_net = float(topo.link_raw_bw[topo.link_class == NET].min())
    implied = 2 * (p - 1) / p * nbytes / got  # bytes/s per step that the answer assumes
    named = [
        (net / 2, "half a network hop: 2(p-1) steps of n/p bytes each, and each step moves its chunk once"),
        (
            net * 2,
            "twice the network hop's rate: an all-reduce is a reduce-scatter AND an all-gather, "
            "2(p-1) steps of n/p bytes",
        ),
        (
            line_net,
            f"the right link (a network hop) at the wrong rate: {line_net / 1e9:.0f} GB/s is its "
            f"datasheet line rate; it delivers the usable {net / 1e9:.0f} GB/s that describe() printed",
        ),
        (400e9, "400 is NDR's rate in gigabits per second; in bytes it is 50 GB/s, of which 48 are usable"),
        (
            nv,
            "the NVLink rate: the wrong link. A step ends when its slowest transfer does, and in every "
            "step two of the 16 transfers cross the network",
        ),
        (
            float(topo.link_raw_bw[topo.link_class == NVLINK][0]),
            "NVLink's datasheet rate: the wrong link. "
            "A step ends when its slowest transfer does, and in every step two transfers cross the network",
        ),
    ]
    for rate, why in named:
        if math.isclose(implied, rate, rel_tol=0.02):
            return f"your t_ring implies {implied / 1e9:.1f} GB/s per step: {why}"
    return (
        f"your t_ring implies {implied / 1e9:.1f} GB/s per step, which is no link's rate: count the bytes "
        "first (2(p-1) steps of n/p bytes), then divide by the usable rate of the slowest link in a step"
    )


def _hier_hint(got: float, nbytes: int, topo, local: int) -> str:
    """What a wrong hierarchical time left out or added."""
    nodes = topo.num_gpus // local
    nv, net = _rates(topo)
    t_nv = 2 * (local - 1) / local * nbytes / nv
    t_net = 2 * (nodes - 1) / nodes * nbytes / local / net
    named = [
        (
            t_net,
            "that is the network phase alone: the reduce-scatter and all-gather inside the node come "
            "before and after it, one after another",
        ),
        (
            t_nv,
            "that is the two NVLink phases alone: between them each GPU all-reduces its 1/L of the "
            "vector with the GPUs of its rail on the other nodes",
        ),
        (
            t_nv + local * t_net,
            "the network phase carries a GPU's own 1/L of the vector, not all of it: "
            "after the reduce-scatter inside the node, each GPU holds one chunk",
        ),
    ]
    for want, why in named:
        if math.isclose(got, want, rel_tol=0.02):
            return why
    return (
        "three phases one after another: reduce-scatter inside the node, an all-reduce of n/L bytes "
        "across the nodes (one per rail), all-gather inside the node"
    )


@exercise
def check_ring_vs_hierarchical(
    t_ring: float | None, t_hier: float | None, nbytes: int = GIB, nodes: int = 2
) -> None:
    """Chapter 4: both all-reduce times, bandwidth terms only, against the simulator."""
    topo = cluster("dgx_h100", nodes)
    want_ring, want_hier = ring_vs_hierarchical(nbytes, nodes)
    need(t_ring, "t_ring")
    need(t_hier, "t_hier")
    t_ring, t_hier = float(t_ring), float(t_hier)
    if math.isclose(t_ring, want_hier, rel_tol=0.02) and math.isclose(t_hier, want_ring, rel_tol=0.02):
        raise AssertionError("t_ring and t_hier are swapped")
    if not math.isclose(t_ring, want_ring, rel_tol=0.02):
        raise AssertionError(f"t_ring is {off(t_ring, want_ring)}; " + _ring_rate_hint(t_ring, nbytes, topo))
    if not math.isclose(t_hier, want_hier, rel_tol=0.02):
        raise AssertionError(f"t_hier is {off(t_hier, want_hier)}; " + _hier_hint(t_hier, nbytes, topo, 8))
    print(
        f"Correct: ring {1e3 * want_ring:.2f} ms, hierarchical {1e3 * want_hier:.2f} ms "
        f"({want_ring / want_hier:.1f}x faster)"
    )


# --- design problem: how many NICs a node needs ---------------------------------------

NIC_CHOICES = (1, 2, 4, 8)


def hierarchical_by_nics(nics: int, nbytes: int = GIB, nodes: int = 4) -> float:
    """Bandwidth-only time (seconds) of ``hierarchical`` on ``nodes`` DGX H100s with ``nics`` NICs each."""
    topo = cluster("dgx_h100", nodes, nics_per_node=nics)
    return simulate("all_reduce", "hierarchical", nbytes, topo, protocol="ideal").time_s


@exercise
def check_nic_design(
    t_by_nics: Mapping[int, float] | None,
    nics_needed: int | None,
    budget_s: float = 15e-3,
    nbytes: int = GIB,
    nodes: int = 4,
) -> None:
    """Chapter 4: the hierarchical all-reduce's time for each NIC count, and the fewest NICs within budget.

    ``t_by_nics`` maps each of 1, 2, 4 and 8 NDR NICs per node to the
    all-reduce's bandwidth-only time; ``nics_needed`` is the fewest that keep
    it within ``budget_s``. Both against the simulator.
    """
    need(t_by_nics, "t_by_nics, a dict {nics: seconds} for 1, 2, 4 and 8 NICs")
    need(nics_needed, "nics_needed")
    missing = [k for k in NIC_CHOICES if k not in t_by_nics]
    assert not missing, f"t_by_nics has no entry for {missing} NICs per node; give all of {NIC_CHOICES}"
    topo = cluster("dgx_h100", nodes)
    local = topo.num_gpus // nodes
    nv, net = _rates(topo)
    t_nv = 2 * (local - 1) / local * nbytes / nv
    want = {k: hierarchical_by_nics(k, nbytes, nodes) for k in NIC_CHOICES}
    got = {k: float(t_by_nics[k]) for k in NIC_CHOICES}
    if all(math.isclose(got[k], got[8], rel_tol=0.01) for k in NIC_CHOICES):
        raise AssertionError(
            "your times do not change with the number of NICs: with k NICs per node, 8/k GPUs share each "
            "one, so what crosses the network leaves a node at k x 48 GB/s, whoever sends it"
        )
    for k in NIC_CHOICES:
        if math.isclose(got[k], want[k] - t_nv, rel_tol=0.02):
            raise AssertionError(
                f"{k} NIC{'s' * (k > 1)}: that is the network phase alone; add the reduce-scatter and the all-gather "
                "inside the node, which run before and after it"
            )
        close(got[k], want[k], f"t_by_nics[{k}]", " s")
    fits = [k for k in NIC_CHOICES if want[k] <= budget_s]
    assert fits, f"no NIC count fits {budget_s * 1e3:g} ms"  # a wrong budget, not a wrong answer
    assert int(nics_needed) in NIC_CHOICES, f"nics_needed must be one of {NIC_CHOICES}, got {nics_needed!r}"
    if int(nics_needed) != fits[0]:
        raise AssertionError(
            f"with {nics_needed} NICs per node the all-reduce takes {1e3 * want[int(nics_needed)]:.1f} ms "
            f"against a budget of {budget_s * 1e3:g} ms: "
            + ("too slow" if want[int(nics_needed)] > budget_s else "within it, but so is a smaller count")
        )
    print(
        "Correct: "
        + ", ".join(f"{k} NIC{'s' * (k > 1)} {1e3 * want[k]:.1f} ms" for k in NIC_CHOICES)
        + f";\n{fits[0]} NICs per node is the fewest within {budget_s * 1e3:g} ms"
    )


# --- exercise: two-level reduce-scatter, bytes across nodes -----------------------------


@exercise
def check_two_level_bytes(
    two_level_bytes: float | None, ring_bytes: float | None, nodes: int = 4, local: int = 8, nbytes: int = GIB
) -> None:
    """Chapter 4: network bytes of the busiest GPU, two-level (``hierarchical``) and flat ring reduce-scatter."""
    p = nodes * local
    need(two_level_bytes, "two_level_bytes")
    need(ring_bytes, "ring_bytes")
    block = nbytes / p
    want_two = network_bytes("reduce_scatter", "hierarchical", p, local, nbytes)
    want_ring = network_bytes("reduce_scatter", "ring", p, local, nbytes)
    two, ring = float(two_level_bytes), float(ring_bytes)
    if math.isclose(two, 2 * want_two, rel_tol=1e-6):
        raise AssertionError("two_level_bytes is an all-reduce's: a reduce-scatter is its first half only")
    if not math.isclose(two, want_two, rel_tol=1e-6):
        raise AssertionError(
            f"two_level_bytes is {two / block:.3g} blocks of {block:.0f} bytes, {off(two, want_two)}: inside the node nothing leaves it; along the rail, a "
            "ring over the nodes sends one block per step"
        )
    if not math.isclose(ring, want_ring, rel_tol=1e-6):
        raise AssertionError(
            f"ring_bytes is {ring / block:.3g} blocks, {off(ring, want_ring)}: in a flat "
            "ring the GPU at a node's boundary sends everything it sends to the next node"
        )
    print(
        f"Correct: the busiest GPU sends {two / block:.0f} blocks across nodes in two levels, "
        f"{ring / block:.0f} in the flat ring ({ring / two:.1f}x)"
    )


__all__ = [
    "NIC_CHOICES",
    "check_hierarchical_all_reduce",
    "check_nic_design",
    "check_ring_vs_hierarchical",
    "check_two_level_bytes",
    "hierarchical_by_nics",
    "ring_vs_hierarchical",
]
