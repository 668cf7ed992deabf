"""The nodes and network cards of chapter 4's clusters, with the figures they are built from.

Every bandwidth is per direction. Each link has two numbers: the datasheet
line rate, and the *usable* rate NCCL's own topology code assigns it
(``nccl_topo``: 20.0 GB/s per NVLink 3 link, 20.6 per NVLink 4 link, 40.1
per NVLink 5 link; a PCIe x16 link of generation ``g`` gives 12 x 2^(g-3)
GB/s, 24 for Gen4, 48 for Gen5). The simulator moves bytes at the usable
rate. A *node* is an NVLink domain (what NCCL counts as a node): eight GPUs
on NVSwitch in a DGX or HGX, 72 in a GB200 NVL72 rack, whose *hosts* (compute
trays) hold four GPUs each.
"""

from __future__ import annotations

from dataclasses import dataclass

GB = 1e9

# PCIe x16 after 128b/130b encoding: Gen3 8 GT/s per lane, doubling each generation (pcie_base_spec).
PCIE_RAW = {gen: 8 * 2 ** (gen - 3) * 16 * 128 / 130 / 8 * GB for gen in (3, 4, 5, 6)}
# NCCL models Gen3 x16 (15.75 GB/s on the wire) as 12 GB/s (PCI_BW, nccl_topo) and later
# generations as twice the one before (topo.cc: width x speed / 80), the same fraction.
PCIE_USABLE_FRACTION = 12.0 * GB / PCIE_RAW[3]


@dataclass(frozen=True)
class Nic:
    """One network port: InfiniBand rate and the PCIe generation of the adapter that carries it."""

    name: str
    gbits: int  # line rate, Gb/s
    pcie: int  # the adapter's PCIe generation (x16)
    adapter: str
    source: str

    @property
    def raw(self) -> float:
        """Bytes/s per direction, the gigabits divided by 8."""
        return self.gbits * GB / 8

    @property
    def usable(self) -> float:
        """Usable bytes/s per direction, 96 % of the line rate (NCCL models a 100 Gb/s NIC as 12 GB/s)."""
        return self.raw * IB_USABLE_FRACTION


IB_USABLE_FRACTION = 12.0 / 12.5
# HDR, NDR and XDR ports (ibta_roadmap) on ConnectX-6 (PCIe Gen4 x16), ConnectX-7 (Gen5 x16)
# and ConnectX-8 (Gen6 x16) adapters.
NICS = {
    "hdr": Nic("hdr", 200, 4, "ConnectX-6", "nvidia_connectx6"),
    "ndr": Nic("ndr", 400, 5, "ConnectX-7", "nvidia_connectx7"),
    "xdr": Nic("xdr", 800, 6, "ConnectX-8", "nvidia_connectx8"),
}
IB_RAW = {k: n.raw for k, n in NICS.items()}


@dataclass(frozen=True)
class NodeSpec:
    """One NVLink domain: its GPUs, their NVLink and PCIe, and the NICs it ships with."""

    name: str
    gpu: str
    arch: str  # NCCL's generation: "ampere", "hopper", "blackwell"
    gpus: int  # GPUs in one NVLink domain
    gpus_per_host: int  # GPUs per host (one operating system, one PCIe tree)
    nvlinks: int  # NVLink links per GPU
    nvlink_raw: float  # bytes/s per link and direction, datasheet
    nvlink_usable: float  # bytes/s per link and direction, NCCL's SMxx_NVLINK_BW
    pcie: int  # PCIe generation of the GPU (x16)
    nic: str  # the NIC it ships with (a key of NICS)
    nvls: bool  # NVSwitch with in-switch reduction (NVLink SHARP)
    sources: tuple[str, ...]

    @property
    def nvlink_per_gpu(self) -> float:
        """Usable bytes/s per direction, all links of one GPU."""
        return self.nvlinks * self.nvlink_usable

    def nic_path(self, nic: Nic) -> float:
        """Usable bytes/s from a GPU to its NIC: the slower of PCIe (as both ends allow) and the port."""
        gen = min(self.pcie, nic.pcie)
        return min(PCIE_RAW[gen] * PCIE_USABLE_FRACTION, nic.usable)


LINK = 25 * GB  # one NVLink 3 or 4 link, per direction (nvidia2020a100, nvidia2022h100)
NODES = {
    # 12 NVLink 3 links; PCIe Gen4; 8 ConnectX-6 HDR ports for compute
    "dgx_a100": NodeSpec("dgx_a100", "A100 SXM4", "ampere", 8, 8, 12, LINK, 20.0 * GB, 4, "hdr", False,
                         ("nvidia2020a100", "nvidia_dgx_a100_guide", "nccl_topo")),
    # 18 NVLink 4 links, third-generation NVSwitch with NVLink SHARP; PCIe Gen5; 8 ConnectX-7 NDR ports
    "dgx_h100": NodeSpec("dgx_h100", "H100 SXM5", "hopper", 8, 8, 18, LINK, 20.6 * GB, 5, "ndr", True,
                         ("nvidia2022h100", "nvidia_dgx_h100_guide", "nccl_topo")),
    # the H100's NVLink, NVSwitch and network with more memory (nvidia2024h200; DGX H100/H200 guide)
    "dgx_h200": NodeSpec("dgx_h200", "H200 SXM5", "hopper", 8, 8, 18, LINK, 20.6 * GB, 5, "ndr", True,
                         ("nvidia2024h200", "nvidia_dgx_h100_guide", "nccl_topo")),
    # 18 NVLink 5 links of 50 GB/s per direction; PCIe Gen5 host link; 8 ConnectX-7 NDR ports
    "dgx_b200": NodeSpec("dgx_b200", "B200", "blackwell", 8, 8, 18, 2 * LINK, 40.1 * GB, 5, "ndr", True,
                         ("nvidia_nvlink", "nvidia_dgx_b200_guide", "mlcommons_b200", "nccl_topo")),
    # 72 GPUs on NVLink switch trays, 18 trays of 4 GPUs, one ConnectX-7 NDR port per GPU
    "gb200_nvl72": NodeSpec("gb200_nvl72", "GB200", "blackwell", 72, 4, 18, 2 * LINK, 40.1 * GB, 5, "ndr", True,
                            ("nvidia_gb200_nvl72", "nvidia_nvlink", "mlcommons_gb200", "nccl_topo")),
}  # fmt: skip


def node_spec(name: str) -> NodeSpec:
    try:
        return NODES[name]
    except KeyError:
        raise ValueError(f"node must be one of {tuple(NODES)}, got {name!r}") from None


def nic_spec(name: str) -> Nic:
    try:
        return NICS[name.lower()]
    except (KeyError, AttributeError):
        raise ValueError(f"nic must be one of {tuple(NICS)}, got {name!r}") from None
