"""Vendor figures for the GPUs the book compares against (chapter 1).

Every number here comes from NVIDIA's architecture whitepapers and datasheets
(``nvidia2020a100``, ``nvidia2021a100ds``, ``nvidia2022h100``,
``nvidia2023h100ds`` in the book's ``references.bib``). Peak tensor-core rates
are the *dense* ones: the datasheets also print rates "with sparsity", twice
as high, which a dense GEMM never reaches.
"""

from __future__ import annotations

from dataclasses import dataclass, field

KiB = 1024
MiB = 1024**2
GB = 10**9
TFLOPS = 10**12


@dataclass(frozen=True)
class GPUSpec:
    """One GPU's published figures (SXM form factor, 80 GB parts).

    Introduced in the book's chapter 1 (the memory hierarchy), where
    ``A100`` and ``H100`` are tabulated next to measurements.
    """

    name: str
    sms: int
    boost_clock_hz: float | None  # None where the vendor's tables give none
    registers_per_sm_bytes: int
    l1_shared_per_sm_bytes: int
    shared_max_per_sm_bytes: int
    l2_bytes: int
    hbm_bytes: int
    hbm_bandwidth: float  # bytes/s
    peak_flops: dict[str, float] = field(default_factory=dict)  # dense, FLOP/s
    source: str = ""

    def ridge_point(self, dtype: str = "bf16") -> float:
        """FLOPs per byte at which ``dtype`` math stops being memory-bound."""
        return self.peak_flops[dtype] / self.hbm_bandwidth

    def shared_memory_bandwidth(self, bytes_per_clock_per_sm: int = 128) -> float:
        """Aggregate shared-memory bandwidth of all SMs, bytes/s.

        32 banks of 4 bytes each serve 128 bytes per clock per SM (CUDA C++
        Programming Guide); the whole GPU multiplies by SMs and clock.
        """
        if self.boost_clock_hz is None:
            raise ValueError(f"{self.name}: no boost clock in the cited documents")
        return bytes_per_clock_per_sm * self.sms * self.boost_clock_hz


A100 = GPUSpec(
    name="A100 SXM4 80GB",
    sms=108,
    boost_clock_hz=1410e6,
    registers_per_sm_bytes=256 * KiB,
    l1_shared_per_sm_bytes=192 * KiB,
    shared_max_per_sm_bytes=164 * KiB,
    l2_bytes=40 * MiB,
    hbm_bytes=80 * GB,
    hbm_bandwidth=2039 * GB,
    peak_flops={"fp32": 19.5 * TFLOPS, "tf32": 156 * TFLOPS, "bf16": 312 * TFLOPS},
    source="nvidia2020a100, nvidia2021a100ds",
)

H100 = GPUSpec(
    name="H100 SXM5 80GB",
    sms=132,
    boost_clock_hz=None,
    registers_per_sm_bytes=256 * KiB,
    l1_shared_per_sm_bytes=256 * KiB,
    shared_max_per_sm_bytes=228 * KiB,
    l2_bytes=50 * MiB,
    hbm_bytes=80 * GB,
    hbm_bandwidth=3350 * GB,
    peak_flops={"fp32": 67 * TFLOPS, "tf32": 494.7 * TFLOPS, "bf16": 989.4 * TFLOPS},
    source="nvidia2022h100, nvidia2023h100ds",
)

GPUS: dict[str, GPUSpec] = {"A100": A100, "H100": H100}


def h100_levels() -> list[tuple[str, float, str]]:
    """One H100's view of the machine, per direction: ``(label, bytes/s, kind)`` from HBM down to a NIC port.

    HBM from chapter 1's vendor table, links from :mod:`mycollectives.topology.links`
    (with the NVLink generations before and after the H100's, and the NICs beside NDR).
    """
    from ..topology import links

    return [
        ("H100 HBM3", H100.hbm_bandwidth, "memory"),
        ("NVLink 5 (B200)", links.NVLINK[4].per_gpu, "NVLink"),
        ("NVLink 4 (H100)", links.NVLINK[3].per_gpu, "NVLink"),
        ("NVLink 3 (A100)", links.NVLINK[2].per_gpu, "NVLink"),
        ("PCIe Gen5 x16", links.PCIE_X16[5], "PCIe"),
        ("PCIe Gen4 x16", links.PCIE_X16[4], "PCIe"),
        ("InfiniBand XDR port", links.ib_bytes("XDR"), "network"),
        ("InfiniBand NDR port", links.ib_bytes("NDR"), "network"),
        ("InfiniBand HDR port", links.ib_bytes("HDR"), "network"),
    ]
