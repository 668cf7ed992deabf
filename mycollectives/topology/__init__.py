"""Topologies for the simulator: devices, links, routes, presets and NCCL's protocols.

Introduced in the book's chapter 4 (Topology); ``mycollectives.sim`` runs
schedules on them and ``mycollectives.viz`` draws them.
"""

from __future__ import annotations

from .graph import CLASS_NAMES, NET, NVLINK, PCI, Builder, Tier, Topology
from .nodes import NICS, NODES, Nic, NodeSpec
from .presets import (
    PRESETS,
    cluster,
    dgx_a100,
    dgx_b200,
    dgx_h100,
    dgx_h200,
    gb200_nvl72,
    nvlink_bridge_pair,
    pcie_box,
)
from .protocols import IDEAL, PROTOCOLS, Protocol, protocol

__all__ = [
    "Topology",
    "Tier",
    "Builder",
    "NVLINK",
    "PCI",
    "NET",
    "CLASS_NAMES",
    "PRESETS",
    "cluster",
    "dgx_a100",
    "dgx_h100",
    "dgx_h200",
    "dgx_b200",
    "gb200_nvl72",
    "NODES",
    "NICS",
    "NodeSpec",
    "Nic",
    "pcie_box",
    "nvlink_bridge_pair",
    "Protocol",
    "PROTOCOLS",
    "IDEAL",
    "protocol",
    "preset",
]


def preset(name: str) -> Topology:
    """A preset by name: ``dgx_a100``, ``dgx_h100``, ``dgx_h100_nvls``, ``pcie_gen4_x4``, ..."""
    try:
        return PRESETS[name]()
    except KeyError:
        raise ValueError(f"unknown preset {name!r}; expected one of {tuple(PRESETS)}") from None
