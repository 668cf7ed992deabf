"""nccl-tests' table, and the same results as CSV and JSON with the machine.

nccl-tests prints one row per size: ``size count type redop root`` and then
``time algbw busbw #wrong`` once for the out-of-place and once for the
in-place run. Here each group of four columns is one algorithm, its name
where nccl-tests writes "out-of-place"; field widths are nccl-tests'.
"""

from __future__ import annotations

import csv
import glob
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Sequence

import torch

from .runner import Result

_LEFT = 52  # width of "size count type redop root"
_GROUP = 32  # width of one "time algbw busbw #wrong" group

CSV_FIELDS = ("collective", "algorithm", "size", "count", "type", "redop", "root", "world_size",
              "time_us", "algbw", "busbw", "wrong")  # fmt: skip


def time_str(us: float) -> str:
    """nccl-tests' time field: fewer decimals as the time grows."""
    if us >= 10000.0:
        return f"{us:7.0f}"
    if us >= 100.0:
        return f"{us:7.1f}"
    return f"{us:7.2f}"


def header(algorithms: Sequence[str]) -> str:
    """The three ``#`` header lines, one column group per algorithm."""
    titles = "#" + " " * (_LEFT - 1) + "".join(f"{a:^{_GROUP}}" for a in algorithms)
    names = "#       size         count      type   redop    root"
    units = "#        (B)    (elements)                            "
    names += "     time   algbw   busbw #wrong" * len(algorithms)
    units = units[:_LEFT] + "     (us)  (GB/s)  (GB/s)       " * len(algorithms)
    return "\n".join([titles.rstrip(), names, units.rstrip()])


def row(results: Sequence[Result], algorithms: Sequence[str]) -> str:
    """One size's row; an algorithm the backend lacks shows N/A."""
    r0 = results[0]
    line = f"{r0.size:12d}  {r0.count:12d}  {r0.type:>8s}  {r0.redop:>6s}  {r0.root:6d}"
    by = {r.algorithm: r for r in results}
    for a in algorithms:
        r = by.get(a)
        if r is None:
            line += f"  {'N/A':>7s}  {'N/A':>6s}  {'N/A':>6s}  {'N/A':>5s}"
            continue
        wrong = "N/A" if r.wrong is None else f"{r.wrong:5d}"
        line += f"  {time_str(r.time_us)}  {r.algbw:6.2f}  {r.busbw:6.2f}  {wrong:>5s}"
    return line


def footer(results: Sequence[Result], algorithms: Sequence[str]) -> str:
    """nccl-tests' closing lines: the average bus bandwidth (here per algorithm)."""
    lines = []
    for a in algorithms:
        bws = [r.busbw for r in results if r.algorithm == a]
        if bws:
            lines.append(f"# Avg bus bandwidth    : {statistics.mean(bws):g}  ({a})")
    return "\n".join(lines)


def last_level_cache() -> int | None:
    """The largest CPU cache's size in bytes (Linux sysfs, else glibc's
    sysconf), or None where neither says."""
    best = None
    for d in glob.glob("/sys/devices/system/cpu/cpu0/cache/index*"):
        try:
            with open(f"{d}/level") as f:
                level = int(f.read())
            with open(f"{d}/type") as f:
                if f.read().strip() == "Instruction":
                    continue
            with open(f"{d}/size") as f:
                text = f.read().strip()
        except (OSError, ValueError):
            continue
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        size = int(text.rstrip("KMG")) * scale
        if best is None or level > best[0]:
            best = (level, size)
    if best:
        return best[1]
    try:
        return os.sysconf("SC_LEVEL3_CACHE_SIZE") or os.sysconf("SC_LEVEL2_CACHE_SIZE") or None
    except (ValueError, OSError, AttributeError):
        return None


def machine(backend: str, world_size: int) -> dict:
    """Where the numbers come from: host, CPU, cores, memory, load, software."""
    cpu = platform.machine()  # not platform.processor(): on Linux it runs `uname -p`
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    mem = None
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError, AttributeError):
        pass
    desc = {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "llc_bytes": last_level_cache(),
        "memory_gib": round(mem, 1) if mem else None,
        "os": "{0}-{2}-{4}".format(*os.uname()),  # not platform.platform(): it runs `uname -p`
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "backend": backend,
        "world_size": world_size,
        "loadavg": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if torch.cuda.is_available():
        desc["gpu"] = torch.cuda.get_device_name(0)
        desc["gpus"] = torch.cuda.device_count()
    return desc


def write_csv(path: str, results: Sequence[Result]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        w.writeheader()
        for r in results:
            w.writerow({k: getattr(r, k) for k in CSV_FIELDS})


def write_json(path: str, results: Sequence[Result], meta: dict) -> None:
    with open(path, "w") as f:
        json.dump({"machine": meta, "results": [r.asdict() for r in results]}, f, indent=1)


def read_json(path: str) -> tuple[dict, list[Result]]:
    """A file :func:`write_json` wrote: the machine and the results."""
    with open(path) as f:
        data = json.load(f)
    return data["machine"], [Result(**r) for r in data["results"]]


def parse_table(text: str) -> list[list[str]]:
    """The data rows of an nccl-tests (or our) table, split into fields.

    Works on nccl-tests' own output too, which is how the book compares the two.
    """
    return [ln.split() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
