"""Each fault of ``torchfr_faults.py`` under torchrun, then the doctor and PyTorch's ``torchfrtrace`` on the
same dumps (chapter 6's table).

::

    python labs/scripts/torchfr_compare.py --out labs/recorded/torchfr_compare.json

Writes, per fault, the first line each tool printed (or the last line of
its traceback) and whether that line names the faulty rank.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
FAULTS = "none skip extra order size dtype collective root op straggler hang die crash slow".split()


def run_job(
    fault: str,
    out: Path,
    nproc: int = 4,
    bad: int = 2,
    steps: int = 6,
    as_json: bool = False,
    timeout: float = 5.0,
):
    """Run the job with ``fault`` (collectives time out after ``timeout`` s); the launcher's completed process."""
    env = dict(os.environ, TORCH_FR_BUFFER_SIZE="2000", OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc)]
    cmd += [str(HERE / "torchfr_faults.py"), "--fault", fault, "--out", str(out), "--steps", str(steps)]
    cmd += ["--bad", str(bad), "--timeout", str(timeout)] + (["--json"] if as_json else [])
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=170)


def first_line(cmd: list[str]) -> str:
    """What a tool says first: its first line of output, or the last line of its traceback."""
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    lines = [x for x in p.stdout.splitlines() if x.strip()]
    if p.returncode not in (0, 1) or not lines:
        err = [x for x in p.stderr.splitlines() if x.strip()]
        return f"exit {p.returncode}: {err[-1] if err else '(nothing)'}"
    return lines[0]


def compare(fault: str, nproc: int = 4, bad: int = 2) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        run_job(fault, out, nproc, bad)
        doctor = first_line([sys.executable, "-m", "mycollectives.doctor", str(out)])
        frt = [
            sys.executable,
            "-m",
            "torch.distributed.flight_recorder.fr_trace",
            str(out),
            "-p",
            "nccl_trace_rank_",
        ]
        theirs = first_line(frt)
        dumps = sorted(p.name for p in out.iterdir())
    return dict(
        fault=fault, dumps=dumps, doctor=doctor, torchfrtrace=theirs, names_rank=f"rank {bad}" in doctor
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--faults", nargs="*", default=FAULTS)
    args = p.parse_args()
    import torch

    rows = [compare(f) for f in args.faults]
    doc = dict(
        command="python labs/scripts/torchfr_compare.py --out " + args.out,
        torch=torch.__version__,
        backend="gloo, 4 ranks on one CPU host, rank 2 faulty at step 3 (seq 13-16)",
        rows=rows,
    )
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
