"""One script, two launchers: labs 4-7's scripts, as torchrun runs them, on the virtual cluster.

``python -m mycollectives.virtual --nproc-per-node 4 labs/scripts/ddp.py ...`` runs the
very script a GPU node runs under torchrun: it finds CUDA (virtual) and NCCL, and
checks its own results against a single-process reference (a failed check exits
non-zero). Small sizes keep each run short; the times are virtual, an H100's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mycollectives.virtual import launch

LABS = Path(__file__).resolve().parent.parent / "labs" / "scripts"
pytestmark = pytest.mark.timeout(600)


@pytest.mark.parametrize(
    ("script", "args"),
    [
        ("ddp.py", ["--width", "64", "--depth", "2", "--steps", "1"]),
        ("fsdp.py", ["--width", "64", "--steps", "2"]),
        ("pipeline.py", ["--width", "64", "--micro-batches", "4"]),
        ("moe.py", ["--tokens", "64", "--hidden", "32", "--experts-per-rank", "1"]),
    ],
)
def test_a_lab_script_runs_through_the_launcher(script, args, tmp_path, capsys):
    out = tmp_path / "result.json"
    argv = ["--nproc-per-node", "4", "--quiet", str(LABS / script), *args, "--out", str(out)]
    assert launch.main(argv) == 0, capsys.readouterr().err[-3000:]
    res = json.loads(out.read_text())
    assert (res["world_size"], res["backend"], res["device"]) == (4, "nccl", "H100 SXM5 (virtual)")
    times = res.get("times") or {}
    assert all(0 < t < 0.1 for t in times.values())  # virtual seconds of a modelled H100 step
