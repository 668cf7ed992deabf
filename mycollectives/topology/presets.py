"""Machines of chapter 4: one node, or clusters of them on a rail-optimised or fat-tree fabric.

The figures come from :mod:`mycollectives.topology.nodes` (each with its
source); this module wires them into a
:class:`~mycollectives.topology.graph.Topology`: inside a node every
GPU hangs from one NVSwitch by all its NVLink links; across nodes each GPU
reaches a NIC over PCIe, NICs plug into leaf switches, and leaves into one
spine.
"""

from __future__ import annotations

from ..cliargs import finite
from ..nccl.constants import NVLS_EFFICIENCY
from .graph import NET, NVLINK, PCI, Builder, Topology
from .nodes import (
    IB_RAW,
    IB_USABLE_FRACTION,
    LINK,
    NICS,
    NODES,
    PCIE_RAW,
    PCIE_USABLE_FRACTION,
    nic_spec,
    node_spec,
)

GB = 1e9
# The figures of the first two presets, by name (chapter 4 quotes them).
NVLINK_LINK_RAW = LINK  # 25 GB/s per NVLink 3 or 4 link and direction (nvidia2020a100, nvidia2022h100)
NVLINK3_LINK_USABLE = NODES["dgx_a100"].nvlink_usable  # SM80_NVLINK_BW, 20.0 GB/s (nccl_topo)
NVLINK4_LINK_USABLE = NODES["dgx_h100"].nvlink_usable  # SM90_NVLINK_BW, 20.6 GB/s (nccl_topo)
A100_NVLINKS, H100_NVLINKS = NODES["dgx_a100"].nvlinks, NODES["dgx_h100"].nvlinks
H100_NVLS_EFFICIENCY = NVLS_EFFICIENCY["hopper"]  # nvlsEfficiency (nccl_tuning)
__all__ = ["IB_RAW", "IB_USABLE_FRACTION", "NICS", "PCIE_RAW", "PCIE_USABLE_FRACTION", "cluster", "PRESETS"]


def _gpus(b: Builder, nodes: int, gpus: int) -> None:
    for n in range(nodes):
        for i in range(gpus):
            b.vertex(f"gpu{n * gpus + i}", "gpu", n * (gpus + 2) + i, 0.0)


def dgx_a100() -> Topology:
    """8 A100 SXM4 GPUs on NVSwitch: 12 NVLink 3 links each, 300 GB/s per direction."""
    return cluster("dgx_a100", nodes=1)


def dgx_h100(nvls: bool = False) -> Topology:
    """8 H100 SXM5 GPUs on NVSwitch: 18 NVLink 4 links each, 450 GB/s per direction.

    ``nvls=True`` enables in-switch reduction (NVLink SHARP), which the
    simulator's ``"nvls"`` algorithm and NCCL's NVLS use.
    """
    return cluster("dgx_h100", nodes=1, nvls=nvls)


def dgx_h200(nvls: bool = True) -> Topology:
    """8 H200 SXM5 GPUs: the H100's NVLink 4 and NVSwitch (with NVLink SHARP)."""
    return cluster("dgx_h200", nodes=1, nvls=nvls)


def dgx_b200(nvls: bool = True) -> Topology:
    """8 B200 GPUs on NVSwitch: 18 NVLink 5 links each, 900 GB/s per direction."""
    return cluster("dgx_b200", nodes=1, nvls=nvls)


def gb200_nvl72(nvls: bool = True) -> Topology:
    """One GB200 NVL72 rack: 72 GPUs in one NVLink domain, 18 hosts of 4."""
    return cluster("gb200_nvl72", nodes=1, nvls=nvls)


def pcie_box(gen: int = 4, gpus: int = 4) -> Topology:
    """``gpus`` PCIe GPUs, each on a x16 link to one host bridge (no NVLink)."""
    b = Builder(f"pcie-gen{gen}-x{gpus}")
    _gpus(b, 1, gpus)
    host = b.vertex("host-bridge", "host", (gpus - 1) / 2, -1.5)
    for g in range(gpus):
        b.cable("pcie", g, host, PCIE_RAW[gen] * PCIE_USABLE_FRACTION, PCIE_RAW[gen], PCI)
    return b.build(gpus, gpus, sources=("pcie_base_spec", "nccl_topo"))


def nvlink_bridge_pair(gen: int = 4) -> Topology:
    """Two A100 PCIe GPUs joined by NVLink bridges (12 NVLink 3 links, 600 GB/s both ways
    together, nvidia2021a100ds), and to the host by PCIe."""
    b = Builder("a100-pcie-nvlink-bridge")
    _gpus(b, 1, 2)
    bridge = b.vertex("nvlink-bridge", "bridge", 0.5, 1.5)
    host = b.vertex("host-bridge", "host", 0.5, -1.5)
    for g in range(2):
        b.cable(
            "nvlink", g, bridge, A100_NVLINKS * NVLINK3_LINK_USABLE, A100_NVLINKS * NVLINK_LINK_RAW, NVLINK
        )
        b.cable("pcie", g, host, PCIE_RAW[gen] * PCIE_USABLE_FRACTION, PCIE_RAW[gen], PCI)
    return b.build(2, 2, sources=("nvidia2021a100ds", "nccl_topo", "pcie_base_spec"))


def _check_cluster(spec, nodes, gpus, nics, fabric, nodes_per_leaf, oversubscription) -> None:
    if nodes < 1 or not 1 <= gpus <= spec.gpus:
        raise ValueError(f"cluster: nodes={nodes} must be >= 1 and gpus_per_node={gpus} in 1..{spec.gpus}")
    if not 1 <= nics <= gpus or gpus % nics:
        raise ValueError(f"cluster: nics_per_node={nics} must divide the node's {gpus} GPUs")
    if fabric not in ("rail", "fat_tree"):
        raise ValueError(f"cluster: fabric must be 'rail' or 'fat_tree', got {fabric!r}")
    finite(oversubscription, "oversubscription", above=0, where="cluster")
    if nodes_per_leaf < 1:
        raise ValueError("cluster: oversubscription must be > 0 and nodes_per_leaf >= 1")


def _network(b: Builder, spec, port, nodes, gpus, nics, fabric, nodes_per_leaf, oversubscription) -> None:
    """The NICs, leaves and spine of a multi-node cluster, and each GPU's PCIe link to its NIC."""
    gen = min(spec.pcie, port.pcie)
    leaves = nics if fabric == "rail" else -(-nodes // nodes_per_leaf)
    per_leaf = nodes * nics / leaves
    width = nodes * (gpus + 2)
    spine = b.vertex("spine", "spine", width / 2, -4.5)
    leaf = [b.vertex(f"leaf{j}", "leaf", (j + 0.5) * width / leaves, -3.0) for j in range(leaves)]
    for j in leaf:
        b.cable("network", j, spine, per_leaf * port.usable / oversubscription, per_leaf * port.raw, NET)
    for n in range(nodes):
        x0 = n * (gpus + 2)
        for k in range(nics):
            v = b.vertex(f"n{n}.nic{k}", "nic", x0 + (k + 0.5) * gpus / nics - 0.5, -1.5)
            b.cable(
                "network", v, leaf[k if fabric == "rail" else n // nodes_per_leaf], port.usable, port.raw, NET
            )
            for i in range(k * gpus // nics, (k + 1) * gpus // nics):
                b.cable("network", n * gpus + i, v, PCIE_RAW[gen] * PCIE_USABLE_FRACTION, PCIE_RAW[gen], PCI)


def cluster(
    node: str = "dgx_h100",
    nodes: int = 2,
    nics_per_node: int | None = None,
    nic: str | None = None,
    fabric: str = "rail",
    nodes_per_leaf: int = 16,
    oversubscription: float = 1.0,
    nvls: bool | None = None,
    sharp: bool = False,
    gpus_per_node: int | None = None,
) -> Topology:
    """``nodes`` NVLink domains of ``node`` (``dgx_a100``, ``dgx_h100``, ``dgx_h200``,
    ``dgx_b200``, ``gb200_nvl72``), each with ``nics_per_node`` NICs of kind ``nic``
    (``hdr``, ``ndr``, ``xdr``; by default one of the node's own per GPU).

    ``fabric="rail"``: NIC ``j`` of every node plugs into leaf switch ``j``
    (rail-optimised, as NVIDIA's SuperPOD reference designs); ``"fat_tree"``:
    the NICs of ``nodes_per_leaf`` consecutive nodes share a leaf. Leaves join
    one spine with ``1 / oversubscription`` of the bandwidth below them. GPU
    ``i`` of a node uses NIC ``i * nics_per_node // gpus``. ``nvls`` turns
    in-switch reduction on or off (default: what the node has); ``sharp``
    marks the fabric as reducing in its switches (SHARP, for NCCL's CollNet);
    ``gpus_per_node`` uses a part of each NVLink domain (an NVL72 partition).
    """
    spec, port = node_spec(node), nic_spec(nic or node_spec(node).nic)
    gpus = gpus_per_node or spec.gpus
    nics = gpus if nics_per_node is None else nics_per_node
    _check_cluster(spec, nodes, gpus, nics, fabric, nodes_per_leaf, oversubscription)
    in_switch = NVLS_EFFICIENCY[spec.arch] if (spec.nvls if nvls is None else nvls) else 0.0
    title = node if nodes == 1 and gpus == spec.gpus else f"{nodes}x{node}-{nics}x{port.name}-{fabric}"
    b = Builder(title + ("-nvls" if in_switch and nodes > 1 else "") + ("-sharp" if sharp else ""))
    _gpus(b, nodes, gpus)
    for n in range(nodes):
        sw = b.vertex(f"n{n}.nvswitch", "nvswitch", n * (gpus + 2) + (gpus - 1) / 2, 1.5)
        for g in range(n * gpus, (n + 1) * gpus):
            b.cable("nvswitch", g, sw, spec.nvlink_per_gpu, spec.nvlinks * spec.nvlink_raw, NVLINK)
    if nodes > 1:
        _network(b, spec, port, nodes, gpus, nics, fabric, nodes_per_leaf, oversubscription)
    sources = spec.sources + ((port.source, "pcie_base_spec") if nodes > 1 else ())
    return b.build(
        nodes * gpus,
        gpus,
        in_switch_reduction=in_switch,
        sources=sources,
        node=spec,
        nic=port if nodes > 1 else None,
        nics_per_node=nics if nodes > 1 else 0,
        sharp=sharp,
    )


PRESETS = {
    "dgx_a100": dgx_a100,
    "dgx_h100": dgx_h100,
    "dgx_h100_nvls": lambda: dgx_h100(nvls=True),
    "dgx_h200": dgx_h200,
    "dgx_b200": dgx_b200,
    "gb200_nvl72": gb200_nvl72,
    "pcie_gen4_x4": lambda: pcie_box(4),
    "pcie_gen5_x4": lambda: pcie_box(5),
    "nvlink_bridge_pair": nvlink_bridge_pair,
}
