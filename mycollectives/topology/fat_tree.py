"""A cluster of one GPU per node on a two-level fat tree (chapter 3, "PAT").

The setting NCCL's PAT is made for (``jeaugey2025pat``): many nodes, one rank
each, so that every step of a collective crosses the network. Node ``i`` is
GPU ``i`` with one InfiniBand NIC (over PCIe); ``nodes_per_leaf``
consecutive nodes share a leaf switch, and the leaves join one spine through
``1 / oversubscription`` of the bandwidth below them (2:1 and 4:1 are common
where the spine is the expensive part). Ranks ``i`` and ``i + 1`` are
usually on one leaf; ranks half the cluster apart never are.
"""

from __future__ import annotations

from ..cliargs import finite
from .graph import NET, PCI, Builder, Topology
from .presets import IB_RAW, IB_USABLE_FRACTION, PCIE_RAW, PCIE_USABLE_FRACTION


def one_gpu_per_node(
    nodes: int,
    nic: str = "ndr",
    nodes_per_leaf: int = 8,
    oversubscription: float = 1.0,
    pcie: int = 5,
) -> Topology:
    """``nodes`` single-GPU nodes, one ``nic`` (``"hdr"`` or ``"ndr"``) each, on leaves and one spine.

    >>> t = one_gpu_per_node(16, nodes_per_leaf=4, oversubscription=2)
    >>> t.path(0, 1), len(t.path(0, 8))
    (['gpu0', 'n0.nic', 'leaf0', 'n1.nic', 'gpu1'], 7)
    """
    finite(oversubscription, "oversubscription", above=0, where="one_gpu_per_node")
    if nodes < 1 or nodes_per_leaf < 1:
        raise ValueError(
            f"one_gpu_per_node: nodes={nodes} and nodes_per_leaf={nodes_per_leaf} must be >= 1 "
            f"and oversubscription={oversubscription} > 0"
        )
    if nic not in IB_RAW:
        raise ValueError(f"one_gpu_per_node: nic must be one of {tuple(IB_RAW)}, got {nic!r}")
    b = Builder(f"{nodes}x1gpu-{nic}-leaf{nodes_per_leaf}-{oversubscription:g}to1")
    for i in range(nodes):
        b.vertex(f"gpu{i}", "gpu", 2 * i, 0.0)
    leaves = -(-nodes // nodes_per_leaf)
    spine = b.vertex("spine", "spine", nodes - 1, -4.5)
    nic_bw, nic_raw = IB_RAW[nic] * IB_USABLE_FRACTION, IB_RAW[nic]
    for j in range(leaves):
        below = min(nodes_per_leaf, nodes - j * nodes_per_leaf)
        leaf = b.vertex(f"leaf{j}", "leaf", 2 * (j * nodes_per_leaf + (below - 1) / 2), -3.0)
        b.cable("network", leaf, spine, below * nic_bw / oversubscription, below * nic_raw, NET)
        for i in range(j * nodes_per_leaf, j * nodes_per_leaf + below):
            v = b.vertex(f"n{i}.nic", "nic", 2 * i, -1.5)
            b.cable("network", v, leaf, nic_bw, nic_raw, NET)
            pcie_bw = PCIE_RAW[pcie] * PCIE_USABLE_FRACTION
            b.cable("network", i, v, pcie_bw, PCIE_RAW[pcie], PCI)
    return b.build(nodes, 1, sources=("nccl_topo", "nvidia_connectx6", "nvidia_connectx7", "pcie_base_spec"))
