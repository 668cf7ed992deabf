"""What needs a CUDA GPU: every algorithm on CUDA tensors, the lab scripts and the
bench on NCCL, symmetric memory and the memory tools on the device.

Marked ``gpu`` (``make test-gpu`` runs exactly these): on a machine without
CUDA each is collected and skipped with that reason (``conftest.py``). One GPU
is enough: NCCL refuses two ranks on one device, so the NCCL tests run at world
size 1 (torchrun ``--nproc-per-node 1``), and the multi-rank tests run the local
world (ranks as threads) on CUDA tensors, 2 to 8 ranks sharing the GPU. The
helpers run on CPU too, and the CPU tests below check them, so a GPU run tests
the device, not the harness.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import mycollectives as mc
from mycollectives.algorithms import COLLECTIVES
from mycollectives.collectives import numpy_reduce, record

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "labs" / "scripts"
CUDA = {"MYCOLLECTIVES_DEVICE": "auto", "MYCOLLECTIVES_TIMEOUT": "120"}
WORLD_SIZES = (2, 3, 5, 8)  # threads sharing one GPU; odd sizes for uneven splits


def _pattern(rank: int, n: int, device) -> torch.Tensor:
    """Small integers: exact in float32 whatever the order of the additions."""
    return ((torch.arange(n, device=device) % 7) + rank + 1).float()


def run_everywhere(collective: str, algorithm: str, p: int, nbytes: int, device: str) -> list:
    """Every rank's output (None where it has none) of one call on the local world."""
    rec = record(collective)
    spec = rec.spec(p, nbytes, 4, **({"root": p - 1} if rec.rooted else {}))
    op = mc.ReduceOp.SUM if rec.reducing else None
    size = lambda pieces: sum(count for _, _, count in pieces)  # noqa: E731

    def fn(rank):
        if device == "cuda":
            torch.cuda.set_device(0)  # each rank is a thread: the device is per thread
        inp = _pattern(rank, size(rec.input_at(spec, rank)), device)
        out = inp if rec.in_place else torch.zeros(size(rec.output_at(spec, rank)), device=device)
        rec.call(mc, inp, out, op, spec.root, None, rank, algorithm=algorithm)
        assert out.device.type == device
        return out.cpu().numpy() if rec.has_output(spec, rank) else None

    return mc.run_local(fn, p, timeout=60)


def expected(collective: str, p: int, nbytes: int) -> list:
    """The record's NumPy oracle on the same inputs."""
    rec = record(collective)
    spec = rec.spec(p, nbytes, 4, **({"root": p - 1} if rec.rooted else {}))
    n_in = [sum(c for _, _, c in rec.input_at(spec, r)) for r in range(p)]
    ins = [_pattern(r, n_in[r], "cpu").double().numpy() if rec.has_input(spec, r) else None for r in range(p)]
    return rec.oracle(spec, ins, numpy_reduce("SUM"))


def check_menu(collective: str, p: int, device: str, nbytes: int = 4 * 1000 + 4) -> None:
    """Every algorithm of ``collective`` on ``p`` ranks gives the oracle's answer on ``device``."""
    want = expected(collective, p, nbytes)
    for algorithm in mc.algorithms(collective):
        got = run_everywhere(collective, algorithm, p, nbytes, device)
        for rank, (g, w) in enumerate(zip(got, want)):
            if w is None or g is None:
                continue
            np.testing.assert_array_equal(
                g.reshape(-1), np.asarray(w).reshape(-1), err_msg=f"{algorithm} rank {rank}"
            )


# --- the harness, checked on CPU -----------------------------------------------


@pytest.mark.parametrize("collective", ["all_reduce", "all_to_all", "reduce"])
def test_the_menu_check_runs_on_cpu(collective):
    check_menu(collective, 3, "cpu")


def test_the_menu_check_catches_a_wrong_answer(monkeypatch):
    rec = record("all_gather")
    real = rec.oracle
    monkeypatch.setattr(type(rec), "oracle", lambda self, s, i, r: [x + 1 for x in real(s, i, r)])
    with pytest.raises(AssertionError):
        check_menu("all_gather", 2, "cpu")


# --- CUDA tensors on the local world (2-8 ranks sharing one GPU) ---------------


@pytest.mark.gpu
@pytest.mark.timeout(600)
@pytest.mark.parametrize("collective", COLLECTIVES)
def test_every_algorithm_on_cuda_tensors(collective):
    for p in WORLD_SIZES:
        check_menu(collective, p, "cuda")


@pytest.mark.gpu
@pytest.mark.timeout(300)
def test_cuda_results_equal_torchs_own_reduction():
    """The all-reduce of CUDA tensors against torch's sum of the same tensors on the GPU."""
    p, n = 5, 1 << 16
    ins = [torch.randn(n, device="cuda", generator=torch.Generator("cuda").manual_seed(r)) for r in range(p)]
    reference = torch.stack(ins).double().sum(0)

    def fn(rank):
        torch.cuda.set_device(0)
        t = ins[rank].clone()
        mc.all_reduce(t, algorithm="ring")
        return t.double()

    for got in mc.run_local(fn, p, timeout=60):
        torch.testing.assert_close(got, reference, rtol=1e-5, atol=1e-4)


# --- NCCL at world size 1: the lab scripts and the bench -----------------------

LAB_SCRIPTS = {
    "pingpong.py": ["--max-bytes", "4096", "--reps", "2"],
    "ddp.py": ["--width", "48", "--depth", "3", "--steps", "1"],
    "fsdp.py": ["--width", "30", "--depth", "2", "--steps", "2"],
    "pipeline.py": ["--width", "32", "--micro", "4", "--micro-batches", "1", "3"],
    "moe.py": ["--tokens", "24", "--hidden", "16", "--experts-per-rank", "1", "2"],
    "allreduce_topo.py": ["--local-size", "1", "--max-bytes", "4096"],
    "faults.py": ["--fault", "none", "--rank", "0", "--steps", "2"],
}


def _torchrun(args: list[str], out: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=1", *args]
    env = {**os.environ, **CUDA, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(args)}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert out.exists(), f"{' '.join(args)} wrote no results"
    return done


@pytest.mark.gpu
@pytest.mark.multiprocess
@pytest.mark.timeout(360)
@pytest.mark.parametrize("script", sorted(LAB_SCRIPTS))
def test_lab_script_on_nccl(script, tmp_path):
    out = tmp_path / "result.json"
    _torchrun([str(SCRIPTS / script), *LAB_SCRIPTS[script], "--out", str(out)], out)
    result = json.loads(out.read_text())
    assert result.get("backend") == "nccl", f"{script} did not run on NCCL: {str(result)[:300]}"


@pytest.mark.gpu
@pytest.mark.multiprocess
@pytest.mark.timeout(360)
def test_the_bench_native_column_on_nccl(tmp_path):
    out = tmp_path / "bench.json"
    args = [
        "-m",
        "mycollectives.bench",
        "--device",
        "cuda",
        "-C",
        "all_reduce",
        "-b",
        "1K",
        "-e",
        "64K",
        "-f",
        "4",
    ]
    _torchrun(
        [*args, "--algorithm", "native,ring", "--reps", "2", "--progress", "0", "--json", str(out)], out
    )
    text = out.read_text()
    assert "native" in text and "ring" in text, text[:500]


# --- symmetric memory and the memory tools on CUDA ----------------------------

_SYMM = """
import torch, torch.distributed as dist, mycollectives as mc
from mycollectives import symmetric
torch.cuda.set_device(0)
dist.init_process_group("nccl", device_id=torch.device("cuda", 0))
t = symmetric.empty(4096, device="cuda")
t.fill_(3.0)
h = symmetric.rendezvous(t, dist.group.WORLD)
assert h.get_buffer(0, (4096,), torch.float32).sum().item() == 3.0 * 4096
for name in mc.algorithms("all_reduce"):
    x = symmetric.empty(1000, device="cuda")
    x.fill_(2.0)
    symmetric.rendezvous(x, dist.group.WORLD)
    mc.all_reduce(x, algorithm=name)
    assert torch.all(x == 2.0), name
open(__import__("sys").argv[1], "w").write("ok")
dist.destroy_process_group()
"""


@pytest.mark.gpu
@pytest.mark.multiprocess
@pytest.mark.timeout(360)
def test_symmetric_heap_and_load_store_on_cuda(tmp_path):
    """torch's _symmetric_memory under the package's API (allocate, rendezvous, read a
    buffer), then every all-reduce, the load/store one included, on tensors in it.

    On CUDA the package hands the heap to torch; its own load/store executor
    recognises only the CPU heap (``symmetric.handle_of``), so these calls run
    as messages: the test checks that they are right, not which path ran."""
    script, out = tmp_path / "symm.py", tmp_path / "ok"
    script.write_text(_SYMM)
    _torchrun([str(script), str(out)], out)


@pytest.mark.gpu
@pytest.mark.timeout(300)
def test_the_memory_tools_measure_the_gpu():
    """Lab 1's tools on CUDA: a bandwidth sweep, the roofline, and the ledger of one step."""
    from mycollectives import memory as mm

    sweep = mm.bandwidth_sweep([1 << 20, 1 << 28], "cuda", bytes_per_measurement=1 << 30)
    assert [p.size_bytes for p in sweep] == [1 << 20, 1 << 28]
    assert all(p.bandwidth > 1e9 for p in sweep), sweep  # any GPU reads more than 1 GB/s
    roof = mm.measure_roofline("cuda", gemm_size=4096, copy_bytes=1 << 28)
    assert roof.peak_flops > 1e12 and roof.bandwidth > 1e10, roof
    cfg = mm.EncoderConfig(n_layers=2, d_model=64, n_heads=4, d_ff=256, batch=2, seq=16)
    got, want = mm.measure(cfg, "cuda", "mixed"), mm.predict(cfg, "mixed")
    for stage in mm.STAGES:
        assert got[stage] == pytest.approx(want[stage], rel=0.10), stage
