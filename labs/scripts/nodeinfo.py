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


# NCCL's numbering of algorithms and protocols in its TUNING log lines (src/include/nccl_common.h)
NCCL_ALGOS = ("Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT")
NCCL_PROTOS = ("LL", "LL128", "Simple")

_HOP = re.compile(
    r"Channel (\d+)(?:/\d+)? : (\d+)\[\w+\] -> (\d+)\[\w+\] (?:\[(?:send|receive)\] )?via (.+?)\s*$", re.M
)


def _transport(via: str) -> str:
    """``P2P``, ``SHM``, ``NET`` (or ``CollNet``...) from what follows "via"; old NCCLs said
    "direct shared memory" for SHM."""
    if "shared memory" in via:
        return "SHM"
    return re.split(r"[/ ]", via, maxsplit=1)[0]


def parse_nccl_log(text: str) -> dict:
    """What NCCL_DEBUG=INFO says about a run: version, network, and each channel's hops.

    ``transports`` counts the hops by how they travel (``P2P/...`` over NVLink
    or PCIe peer-to-peer, ``SHM`` through host memory, ``NET/...`` over the
    network); ``gdr`` counts network hops that use GPUDirect RDMA (``GDRDMA``:
    the NIC reads and writes GPU memory, no bounce through the CPU).
    ``channel_counts`` is NCCL's "N coll channels, ..." line, ``nodes`` and
    ``ranks`` its communicator line, ``p2p_level`` a ``NCCL_P2P_LEVEL`` it
    was given, and ``choices`` the (bytes, algorithm, protocol) of every call
    logged with ``NCCL_DEBUG_SUBSYS=TUNING`` (numbers translated by
    ``NCCL_ALGOS`` and ``NCCL_PROTOS``, names kept).
    """
    version = re.search(r"NCCL version (\S+)", text)
    network = re.search(r"Using network (\S+)", text)
    hops = [(int(c), int(s), int(d), via) for c, s, d, via in _HOP.findall(text)]
    counts = re.search(
        r"(\d+) coll channels, (?:(\d+) collnet channels, )?(?:(\d+) nvls channels, )?(\d+) p2p", text
    )
    comm = re.search(r"nRanks (\d+) nNodes (\d+)", text)
    level = re.search(r"NCCL_P2P_LEVEL set by environment to (\w+)", text)
    choices = []
    for nbytes, algo, proto in re.findall(r"(\d+) Bytes -> Algo (\w+) proto (\w+)", text):
        algo = NCCL_ALGOS[int(algo)] if algo.isdigit() and int(algo) < len(NCCL_ALGOS) else algo
        proto = NCCL_PROTOS[int(proto)] if proto.isdigit() and int(proto) < len(NCCL_PROTOS) else proto
        choices.append((int(nbytes), algo, proto))
    return dict(
        version=version.group(1) if version else None,
        network=network.group(1) if network else None,
        hops=hops,
        transports=dict(Counter(_transport(via) for *_, via in hops)),
        gdr=sum("GDRDMA" in via for *_, via in hops),
        channels=len({c for c, *_ in hops}),
        channel_counts=None
        if counts is None
        else dict(
            coll=int(counts.group(1)),
            collnet=int(counts.group(2) or 0),
            nvls=int(counts.group(3) or 0),
            p2p=int(counts.group(4)),
        ),
        ranks=int(comm.group(1)) if comm else None,
        nodes=int(comm.group(2)) if comm else None,
        p2p_level=level.group(1) if level else None,
        choices=choices,
    )
