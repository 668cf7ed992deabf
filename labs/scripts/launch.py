"""Launch a lab script with torchrun from a notebook or a test, and read its results.

``torchrun(script, ...)`` runs ``python -m torch.distributed.run --standalone
--nproc-per-node N labs/scripts/<script> --out <json>`` and returns rank 0's
JSON. N is the number of GPUs in GPU mode (one rank per GPU), else 4 CPU
processes with gloo. ``virtual="dgx_h100:2"`` runs the same script without
torchrun, its ranks as threads of one process on that virtual cluster
(``python labs/scripts/<script> --virtual dgx_h100:2``), timed in virtual time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

SCRIPTS = Path(__file__).resolve().parent
ROOT = SCRIPTS.parent.parent


def gpu_mode() -> bool:
    """True on a node with at least two GPUs, unless ``MYCOLLECTIVES_DEVICE=cpu``."""
    if os.environ.get("MYCOLLECTIVES_DEVICE", "auto") == "cpu":
        return False
    return torch.cuda.is_available() and torch.cuda.device_count() >= 2


def default_nproc() -> int:
    return torch.cuda.device_count() if gpu_mode() else 4


def command(script: str, *args: str, nproc: int | None = None, virtual: str | None = None) -> list[str]:
    """``python -m torch.distributed.run --standalone --nproc-per-node N labs/scripts/<script> ARGS``,
    or with ``virtual``, ``python labs/scripts/<script> --virtual NODE[:NODES] ARGS``."""
    if virtual is not None:
        return [sys.executable, str(SCRIPTS / script), "--virtual", virtual, *args]
    nproc = nproc or default_nproc()
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}"]
    return cmd + [str(SCRIPTS / script), *args]


def run_job(
    script: str,
    *args: str,
    nproc: int | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 600,
    virtual: str | None = None,
) -> subprocess.CompletedProcess:
    """Run ``labs/scripts/<script>`` under torchrun (or on a ``virtual`` cluster) and return the
    finished process, whether or not a rank failed (chapter 6 runs jobs that are meant to fail)."""
    full_env = {**os.environ, "OMP_NUM_THREADS": "1", **(env or {})}
    # the script, run by its path, imports labs.scripts.common from this checkout
    full_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), full_env.get("PYTHONPATH")]))
    cmd = command(script, *args, nproc=nproc, virtual=virtual)
    return subprocess.run(cmd, cwd=ROOT, env=full_env, capture_output=True, text=True, timeout=timeout)


def torchrun(
    script: str,
    *args: str,
    nproc: int | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 600,
    echo: bool = True,
    virtual: str | None = None,
) -> dict:
    """Run ``labs/scripts/<script>`` on ``nproc`` ranks (or on every GPU of a ``virtual``
    cluster, ``"dgx_h100:2"``); return rank 0's results.

    Raises ``RuntimeError`` with the tail of the output if any rank fails
    (an assertion in a script fails the notebook cell that launched it).
    """
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        proc = run_job(
            script, *args, "--out", str(out), nproc=nproc, env=env, timeout=timeout, virtual=virtual
        )
        if echo and proc.stdout:
            print(proc.stdout, end="")
        if proc.returncode != 0:
            raise RuntimeError(
                f"{' '.join(proc.args[1 if virtual else 2 :])} failed with exit code {proc.returncode}:\n"
                f"{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
            )
        result = json.loads(out.read_text())
        result["stdout"], result["stderr"] = proc.stdout, proc.stderr  # NCCL_DEBUG logs go to stdout
        return result
