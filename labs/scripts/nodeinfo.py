"""Lab 8: read a node's topology from ``nvidia-smi topo -m`` and NCCL's INFO log.

Both parsers are tolerant: lines they do not recognise are skipped, so a newer
driver or NCCL that adds columns or messages does not break the lab.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections import Counter

# nvidia-smi's legend, strongest connection first
LINK_KINDS = {
    "NV": "NVLink (the number is how many links join the pair)",
    "PIX": "one PCIe switch between them",
    "PXB": "several PCIe switches, no host bridge",
    "PHB": "through a PCIe host bridge (the CPU)",
    "NODE": "across host bridges within one NUMA node",
    "SYS": "across NUMA nodes (the CPU interconnect)",
}


def nvidia_smi_topo() -> str | None:
    """The output of ``nvidia-smi topo -m``, or None where there is no nvidia-smi."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    proc = subprocess.run([exe, "topo", "-m"], capture_output=True, text=True, timeout=60)
    return proc.stdout if proc.returncode == 0 else None


def parse_topo_matrix(text: str) -> dict[tuple[int, int], str]:
    """``{(i, j): "NV12" | "PIX" | ...}`` for every pair of GPUs in ``nvidia-smi topo -m``."""
    lines = [ln.replace("\x1b[4m", "").replace("\x1b[0m", "") for ln in text.splitlines()]
    header = next((ln.split() for ln in lines if ln.split()[:1] == ["GPU0"]), None)
    if header is None:
        return {}
    gpus = [h for h in header if re.fullmatch(r"GPU\d+", h)]
    links = {}
    for ln in lines:
        cells = ln.split()
        if cells and re.fullmatch(r"GPU\d+", cells[0]) and len(cells) > len(gpus):
            i = int(cells[0][3:])
            for j, cell in enumerate(cells[1 : len(gpus) + 1]):
                if i != j:
                    links[i, j] = cell
    return links


def parse_nccl_log(text: str) -> dict:
    """What NCCL_DEBUG=INFO says about a run: version, network, and each channel's hops.

    ``transports`` counts the hops by how they travel (``P2P/...`` over NVLink
    or PCIe peer-to-peer, ``SHM`` through host memory, ``NET/...`` over the
    network).
    """
    version = re.search(r"NCCL version (\S+)", text)
    network = re.search(r"Using network (\S+)", text)
    hops = re.findall(r"Channel (\d+)/\d+ : (\d+)\[\w+\] -> (\d+)\[\w+\] (?:\[\w+\] )?via (\S+)", text)
    return dict(
        version=version.group(1) if version else None,
        network=network.group(1) if network else None,
        hops=[(int(c), int(s), int(d), via) for c, s, d, via in hops],
        transports=dict(Counter(via.split("/")[0] for *_, via in hops)),
        channels=len({c for c, *_ in hops}),
    )
