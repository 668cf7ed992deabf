"""Datasheet rates of the links of chapter 4 ("Links"), per GPU and per direction.

Vendors quote NVLink bandwidth *bidirectional* (both directions added) and
InfiniBand in *gigabits* per second; PCIe is specified in gigatransfers per
second per lane before line encoding. A collective's time depends on bytes per
second in one direction, so every figure here is converted to that, and
:func:`bidirectional` gives back the number a datasheet prints.

Sources (``references.bib`` keys): NVLink 1 ``nvidia2016p100``, NVLink 2
``nvidia2017v100``, NVLink 3 ``nvidia2020a100``, NVLink 4
``nvidia2022h100``, NVLink 5 ``nvidia_nvlink``; PCIe ``pcie_base_spec``;
InfiniBand ``ibta_roadmap``, ``nvidia_connectx6``, ``nvidia_connectx7``,
``nvidia_connectx8``.
"""

from __future__ import annotations

from dataclasses import dataclass

from .nodes import PCIE_RAW

GB = 1e9


@dataclass(frozen=True)
class NVLinkGeneration:
    """One NVLink generation as used by one GPU: links per GPU, GB/s per link per direction."""

    generation: int
    gpu: str
    links: int
    per_link: float  # bytes/s per direction
    source: str

    @property
    def per_gpu(self) -> float:
        """Bytes/s per direction, all links of the GPU together."""
        return self.links * self.per_link


NVLINK = [
    NVLinkGeneration(1, "P100", 4, 20 * GB, "nvidia2016p100"),
    NVLinkGeneration(2, "V100", 6, 25 * GB, "nvidia2017v100"),
    NVLinkGeneration(3, "A100", 12, 25 * GB, "nvidia2020a100"),
    NVLinkGeneration(4, "H100", 18, 25 * GB, "nvidia2022h100"),
    NVLinkGeneration(5, "B200", 18, 50 * GB, "nvidia_nvlink"),
]

# PCIe x16, per direction, after 128b/130b encoding (Gen3 onwards): from the presets.
PCIE_X16 = {gen: PCIE_RAW[gen] for gen in (3, 4, 5)}

# InfiniBand 4x port signalling rates, Gb/s: HDR, NDR, XDR (ibta_roadmap; ConnectX-6/7/8).
IB_GBITS = {"HDR": 200, "NDR": 400, "XDR": 800}


def ib_bytes(rate: str) -> float:
    """Bytes/s per direction of one InfiniBand port: gigabits / 8."""
    return IB_GBITS[rate] * GB / 8


def bidirectional(per_direction: float) -> float:
    """What a datasheet quoting "bidirectional" bandwidth prints: both directions added."""
    return 2 * per_direction


def nvlink_table() -> str:
    """The NVLink generations, one line each: links, GB/s per link and per GPU (one direction), datasheet."""
    lines = [
        f"{'NVLink':>6s} {'GPU':>5s} {'links':>5s} {'GB/s per link':>14s} {'per GPU':>8s} {'datasheet':>10s}"
    ]
    for g in NVLINK:
        lines.append(
            f"{g.generation:6d} {g.gpu:>5s} {g.links:5d} {g.per_link / GB:14.0f} {g.per_gpu / GB:8.0f} "
            f"{bidirectional(g.per_gpu) / GB:5.0f} both ways"
        )
    return "\n".join(lines)


__all__ = ["NVLinkGeneration", "NVLINK", "PCIE_X16", "IB_GBITS", "ib_bytes", "bidirectional", "nvlink_table"]
