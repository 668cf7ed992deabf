"""Machines of chapter 4, with the figures they are built from and where they come from.

Every bandwidth below is per direction. Two numbers per link: the datasheet
line rate, and the *usable* rate that NCCL's own topology model assigns to
it (``nccl_topo``: 20.0 GB/s per NVLink 3 link, 20.6 per NVLink 4 link,
12 GB/s for a 100 Gb/s NIC and for PCIe Gen3 x16). The simulator moves bytes
at the usable rate; the book shows both.
"""

from __future__ import annotations

from .graph import NET, NVLINK, PCI, Builder, Topology

GB = 1e9

# NVLink: 25 GB/s per link per direction; A100 has 12 links, H100 SXM 18
# (nvidia2020a100, nvidia2022h100). Usable per link: nccl_topo.
NVLINK_LINK_RAW = 25 * GB
NVLINK3_LINK_USABLE = 20.0 * GB  # SM80_NVLINK_BW, nccl_topo
NVLINK4_LINK_USABLE = 20.6 * GB  # SM90_NVLINK_BW, nccl_topo
A100_NVLINKS, H100_NVLINKS = 12, 18
# NVLink SHARP (in-switch reduction) efficiency NCCL's tuner assumes on Hopper: nccl_tuning
H100_NVLS_EFFICIENCY = 0.85

# PCIe x16 after 128b/130b encoding: Gen3 8 GT/s, Gen4 16, Gen5 32 per lane (pcie_base_spec).
PCIE_RAW = {gen: rate * 16 * 128 / 130 / 8 * GB for gen, rate in ((3, 8), (4, 16), (5, 32))}
# NCCL models Gen3 x16 (15.75 GB/s on the wire) as 12 GB/s (PCI_BW, nccl_topo);
# we assume the same fraction holds for later generations.
PCIE_USABLE_FRACTION = 12.0 * GB / PCIE_RAW[3]

# InfiniBand per port: HDR 200 Gb/s, NDR 400 Gb/s (nvidia_connectx6, nvidia_connectx7).
IB_RAW = {"hdr": 200 / 8 * GB, "ndr": 400 / 8 * GB}
# NCCL models a 100 Gb/s NIC as 12 GB/s (NET_BW, nccl_topo): 96 % of line rate;
# NVIDIA's engineers quote 46-48 GB/s per NDR NIC in nccl-tests (nccl_tests_issue290).
IB_USABLE_FRACTION = 12.0 / 12.5

# Compute NICs per node: DGX A100 8 x ConnectX-6 HDR, DGX H100 8 x ConnectX-7 NDR
# (nvidia_dgx_a100_guide, nvidia_dgx_h100_guide).
NODES = {
    "dgx_a100": dict(links=A100_NVLINKS, per_link=NVLINK3_LINK_USABLE, nvls=0.0, pcie=4, nic="hdr"),
    "dgx_h100": dict(links=H100_NVLINKS, per_link=NVLINK4_LINK_USABLE, nvls=0.0, pcie=5, nic="ndr"),
}
SOURCES = ("nvidia2020a100", "nvidia2022h100", "nccl_topo", "nccl_tuning")


def _node(b: Builder, kind: str, node: int, gpus: int, x0: float) -> list[int]:
    """GPUs of one NVSwitch node and the switch they hang from (tier ``nvswitch``)."""
    spec = NODES[kind]
    sw = b.vertex(f"n{node}.nvswitch", "nvswitch", x0 + (gpus - 1) / 2, 1.5)
    ids = [node * gpus + i for i in range(gpus)]
    for g in ids:
        b.cable("nvswitch", g, sw, spec["links"] * spec["per_link"], spec["links"] * NVLINK_LINK_RAW, NVLINK)
    return ids


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
    simulator's ``"nvls"`` algorithm uses.
    """
    return cluster("dgx_h100", nodes=1, nvls=nvls)


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


def cluster(
    node: str = "dgx_h100",
    nodes: int = 2,
    nics_per_node: int = 8,
    nic: str | None = None,
    fabric: str = "rail",
    nodes_per_leaf: int = 16,
    oversubscription: float = 1.0,
    nvls: bool = False,
) -> Topology:
    """``nodes`` DGX-like nodes of 8 GPUs, each with ``nics_per_node`` InfiniBand NICs.

    ``fabric="rail"``: NIC ``j`` of every node plugs into leaf switch ``j``
    (rail-optimised, as NVIDIA's SuperPOD reference designs); ``"fat_tree"``:
    the NICs of ``nodes_per_leaf`` consecutive nodes share a leaf. Leaves join
    one spine with ``1 / oversubscription`` of the bandwidth below them.
    GPU ``i`` of a node uses NIC ``i * nics_per_node // 8`` (over PCIe).
    """
    if node not in NODES:
        raise ValueError(f"node must be one of {tuple(NODES)}, got {node!r}")
    if fabric not in ("rail", "fat_tree"):
        raise ValueError(f"fabric must be 'rail' or 'fat_tree', got {fabric!r}")
    spec, gpus = NODES[node], 8
    nic = nic or spec["nic"]
    title = node if nodes == 1 else f"{nodes}x{node}-{nics_per_node}x{nic}-{fabric}"
    b = Builder(title + ("-nvls" if nvls else ""))
    _gpus(b, nodes, gpus)
    for n in range(nodes):
        _node(b, node, n, gpus, n * (gpus + 2))
    if nodes > 1:
        nic_bw, nic_raw = IB_RAW[nic] * IB_USABLE_FRACTION, IB_RAW[nic]
        pcie_raw = PCIE_RAW[spec["pcie"]]
        leaves = nics_per_node if fabric == "rail" else -(-nodes // nodes_per_leaf)
        per_leaf = nodes * nics_per_node / leaves
        width = nodes * (gpus + 2)
        spine = b.vertex("spine", "spine", width / 2, -4.5)
        leaf = [b.vertex(f"leaf{j}", "leaf", (j + 0.5) * width / leaves, -3.0) for j in range(leaves)]
        for j in leaf:
            b.cable("network", j, spine, per_leaf * nic_bw / oversubscription, per_leaf * nic_raw, NET)
        for n in range(nodes):
            x0 = n * (gpus + 2)
            for k in range(nics_per_node):
                v = b.vertex(f"n{n}.nic{k}", "nic", x0 + (k + 0.5) * gpus / nics_per_node - 0.5, -1.5)
                b.cable(
                    "network", v, leaf[k if fabric == "rail" else n // nodes_per_leaf], nic_bw, nic_raw, NET
                )
                for i in range(k * gpus // nics_per_node, (k + 1) * gpus // nics_per_node):
                    b.cable("network", n * gpus + i, v, pcie_raw * PCIE_USABLE_FRACTION, pcie_raw, PCI)
    sources = SOURCES + (("nvidia_dgx_a100_guide",) if node == "dgx_a100" else ("nvidia_dgx_h100_guide",))
    return b.build(
        nodes * gpus,
        gpus,
        in_switch_reduction=H100_NVLS_EFFICIENCY if nvls else 0.0,
        sources=sources + (("nvidia_connectx6", "nvidia_connectx7") if nodes > 1 else ()),
    )


PRESETS = {
    "dgx_a100": dgx_a100,
    "dgx_h100": dgx_h100,
    "dgx_h100_nvls": lambda: dgx_h100(nvls=True),
    "pcie_gen4_x4": lambda: pcie_box(4),
    "pcie_gen5_x4": lambda: pcie_box(5),
    "nvlink_bridge_pair": nvlink_bridge_pair,
}
