"""``python -m mycollectives.virtual``: torchrun scripts, unmodified, on 1 and 2 virtual nodes.

The scripts in ``tests/launcher_scripts`` are written as PyTorch's tutorials
write them for torchrun (DDP, FSDP2, CUDA event timing, the
``torch.accelerator`` API, gloo on the CPU). The launcher runs in this
process (``launch.main``), as the console command does.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from torch import nn

from mycollectives.virtual import launch, roofline_of, topology_of
from mycollectives.virtual.compute import op_time

SCRIPTS = Path(__file__).parent / "launcher_scripts"
pytestmark = pytest.mark.timeout(300)
NODES = pytest.mark.parametrize("nodes", [1, 2])


def launched(*argv: str) -> int:
    return launch.main(["--quiet", *map(str, argv)])


def reference_losses(steps: int) -> list[float]:
    """The single-process reference: the whole global batch on one model (ddp_train.py's)."""
    import sys

    sys.path.insert(0, str(SCRIPTS))
    try:
        from ddp_train import batch, model
    finally:
        sys.path.remove(str(SCRIPTS))
    net = model()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    out = []
    for step in range(steps):
        x, y = batch(step)
        loss = nn.functional.mse_loss(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        out.append(loss.item())
    return out


@NODES
def test_the_ddp_tutorial_runs_unmodified(nodes, capsys):
    assert launched("--nnodes", nodes, "--nproc-per-node", 2, SCRIPTS / "ddp_tutorial.py") == 0
    out = capsys.readouterr().out
    for rank in range(2 * nodes):
        assert f"[rank {rank}] joined a group of {2 * nodes} processes" in out
        assert f"[rank {rank}] one DDP step done, loss " in out


@NODES
@pytest.mark.parametrize("script", ["ddp_train.py", "fsdp2_train.py"])
def test_losses_equal_a_single_process_reference(script, nodes, tmp_path):
    out = tmp_path / "losses.json"
    assert (
        launched("--nnodes", nodes, "--nproc-per-node", 2, SCRIPTS / script, "--out", out, "--steps", 3) == 0
    )
    got = json.loads(out.read_text())["losses"]
    assert got == pytest.approx(reference_losses(3), abs=1e-5)
    assert got[2] < got[0]  # it trains


@NODES
def test_cuda_events_time_in_virtual_milliseconds(nodes, tmp_path):
    out = tmp_path / "times.json"
    assert launched("--nnodes", nodes, "--nproc-per-node", 2, SCRIPTS / "cuda_events.py", out) == 0
    got = json.loads(out.read_text())
    n, roof = 256, roofline_of(topology_of("dgx_h100"))
    assert got["matmul_ms"] == pytest.approx(op_time(roof, 2 * n**3, 3 * n * n * 2) * 1e3, rel=1e-9)
    assert got["sum"] == 2 * nodes
    assert 0 < got["all_reduce_ms"] < 1.0  # 4 MiB on NVLink (and the network), virtual


@NODES
def test_the_accelerator_api_sees_one_gpu_per_rank(nodes, tmp_path):
    out = tmp_path / "seen.json"
    assert launched("--nnodes", nodes, "--nproc-per-node", 2, SCRIPTS / "accelerator_api.py", out) == 0
    seen = json.loads(out.read_text())
    assert len(seen) == 2 * nodes
    for rank, s in enumerate(seen):
        assert (s["available"], s["count"], s["type"], s["index"]) == (True, 2, "cuda", rank % 2)
        assert s["backend"] == "nccl" and s["sum"] == sum(range(2 * nodes))
        assert s["group_backend"] == "nccl"  # what the script asked for, as under torchrun
        assert s["grew"] == 1024 * 4  # the new tensor, in the rank's memory ledger
        assert s["cuda"] == [True, 2, rank % 2]
        env = {"RANK": rank, "LOCAL_RANK": rank % 2, "WORLD_SIZE": 2 * nodes, "LOCAL_WORLD_SIZE": 2}
        assert s["env"] == {**{k: str(v) for k, v in env.items()}, "GROUP_RANK": str(rank // 2)}


@NODES
def test_gloo_on_cpu_with_object_collectives_subgroups_and_a_sampler(nodes, tmp_path):
    out = tmp_path / "gloo.json"
    assert launched("--nnodes", nodes, "--nproc-per-node", 2, SCRIPTS / "gloo_cpu.py", out) == 0
    world = 2 * nodes
    got = json.loads(out.read_text())
    evens = len(range(0, world, 2))
    for rank, g in enumerate(got):
        assert g["sum"] == world * (world + 1) / 2 and g["obj"] == {"from": 0}
        assert g["evens"] == (evens if rank % 2 == 0 else 1.0)
        assert g["seen"] == [float(i) for i in range(rank, 16, world)]
        assert g["backends"] == ["gloo", "gloo"]


def test_runs_are_deterministic_bit_for_bit(tmp_path):
    traces = []
    for i in range(2):
        trace = tmp_path / f"t{i}.json"
        argv = ["--nnodes", 2, "--nproc-per-node", 2, "--trace", trace, SCRIPTS / "ddp_train.py"]
        assert launched(*argv, "--out", tmp_path / f"l{i}.json") == 0
        traces.append(trace.read_bytes())
    assert traces[0] == traces[1]
    assert (tmp_path / "l0.json").read_bytes() == (tmp_path / "l1.json").read_bytes()


def test_the_trace_is_chrome_trace_json(tmp_path, capsys):
    trace = tmp_path / "run.json"
    argv = ["--nnodes", 2, "--nproc-per-node", 2, "--trace", trace, SCRIPTS / "ddp_train.py"]
    assert launch.main([*map(str, argv), "--out", str(tmp_path / "l.json")]) == 0
    err = capsys.readouterr().err
    assert "virtual time on 2xdgx_h100" in err and "exposed comm ms" in err and "network sent" in err
    events = json.loads(trace.read_text())["traceEvents"]
    complete = [e for e in events if e["ph"] == "X"]
    assert {e["pid"] for e in events} == {0, 1, 2, 3}
    assert all(e["dur"] >= 0 and isinstance(e["ts"], float) for e in complete)
    assert {e["cat"] for e in complete} >= {"compute", "stream"}
    names = {m["args"]["name"] for m in events if m["ph"] == "M" and m["name"] == "process_name"}
    assert names == {f"rank {r}" for r in range(4)}
    calls = [e for e in complete if e["name"] == "all_reduce"]
    assert calls and all({"algorithm", "bytes", "count", "dtype"} <= set(e["args"]) for e in calls)
    assert sorted(os.listdir(tmp_path)) == ["l.json", "run.json"]  # nothing else left behind


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--cluster", "dgx_h999", "x.py"], "unknown cluster 'dgx_h999'"),
        (["--nproc-per-node", "0", "x.py"], "--nproc-per-node must be at least 1"),
        (["--nproc-per-node", "-3", "x.py"], "--nproc-per-node must be at least 1"),
        (["--nnodes", "two", "x.py"], "--nnodes must be a whole number"),
        (["--nproc-per-node", "9", "x.py"], "a dgx_h100 node has 8 GPUs"),
        (["no_such_script.py"], "script 'no_such_script.py' not found"),
        (["-m", "no_such_module_anywhere"], "module 'no_such_module_anywhere' not found"),
        (["--trace", "no_such_dir/t.json", "x.py"], "folder"),  # refused before the run, not after it
        (["--trace", ".", "x.py"], "is a directory"),
        (["--timeout", "nan", "x.py"], "'--timeout' must be a finite number > 0, got nan"),
        (["--timeout", "-1", "x.py"], "'--timeout' must be a finite number > 0"),
        (["--master-port", "99999", "x.py"], "expected a TCP port"),
    ],
)
def test_bad_input_exits_2_with_a_clear_message(argv, says, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.py").write_text("raise SystemExit('must not run')\n")
    with pytest.raises(SystemExit) as e:
        launch.main(argv)
    assert e.value.code == 2
    assert says in capsys.readouterr().err


def _script(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "script.py"
    path.write_text("import os, torch, torch.distributed as dist\ndist.init_process_group('nccl')\n" + body)
    return path


def test_the_ranks_leave_the_interpreters_excepthook_as_they_found_it(tmp_path):
    """Each rank's init_process_group wraps sys.excepthook with its rank's prefix; after the run, an
    error of the launcher's own process must not print under eight nested "[rankN]:" prefixes."""
    import sys

    hook = sys.excepthook
    assert launched("--nproc-per-node", 4, _script(tmp_path, "dist.barrier()\n")) == 0
    assert sys.excepthook is hook


def test_a_second_init_process_group_is_refused_as_torch_refuses_it(tmp_path, capsys):
    body = "dist.init_process_group('nccl')\n"
    assert launched("--nproc-per-node", 2, _script(tmp_path, body)) == 1
    assert "trying to initialize the default process group twice!" in capsys.readouterr().err


def test_a_rank_that_raises_is_named_with_its_traceback(tmp_path, capsys):
    body = "if dist.get_rank() == 1:\n    raise ValueError('bad batch')\ndist.barrier()\nprint('rank done')\n"
    assert launched("--nproc-per-node", 4, _script(tmp_path, body)) == 1
    out, err = capsys.readouterr()
    assert "rank 1 failed" in err and "ValueError" in err and "bad batch" in err
    assert f'File "{tmp_path / "script.py"}", line 4' in err  # the script's own line
    assert "rank done" not in out  # the others were stopped in their barrier


def test_a_deadlock_names_who_waits_on_whom(tmp_path, capsys):
    body = "t = torch.zeros(1)\ndist.recv(t, src=1 - dist.get_rank())\n"
    assert launched("--nproc-per-node", 2, _script(tmp_path, body)) == 1
    err = capsys.readouterr().err
    assert "deadlock" in err
    assert "rank 0 waits to receive from rank 1" in err and "rank 1 waits to receive from rank 0" in err
    assert "script.py:4" in err


@pytest.mark.parametrize(
    ("call", "names"),
    [
        (
            "g = torch.cuda.CUDAGraph()",
            "torch.cuda.CUDAGraph is not emulated on the virtual cluster (CUDA graphs)",
        ),
        ("f = torch.compile(lambda x: x + 1)", "torch.compile is not emulated on the virtual cluster"),
        (
            "u = torch.cuda.utilization()",
            "torch.cuda.utilization is not emulated on the virtual cluster (NVML",
        ),
        ("from torch.utils.cpp_extension import load_inline\nload_inline('k', '')", "custom CUDA kernels"),
    ],
)
def test_a_cuda_feature_not_emulated_is_one_clear_line(call, names, tmp_path, capsys):
    assert launched("--nproc-per-node", 2, _script(tmp_path, call + "\n")) == 1
    err = capsys.readouterr().err
    assert names in err and len(err.strip().splitlines()) == 1


def test_torch_and_the_process_are_put_back(tmp_path):
    before = (torch.cuda.is_available, torch.cuda.Event, torch.load, os.environ, torch.compile)
    argv0 = list(os.sys.argv)
    assert launched("--nproc-per-node", 2, SCRIPTS / "ddp_tutorial.py") == 0
    assert (torch.cuda.is_available, torch.cuda.Event, torch.load, os.environ, torch.compile) == before
    assert os.sys.argv == argv0 and "RANK" not in os.environ
    assert torch.cuda.is_available() is False and not torch.distributed.is_initialized()


def test_save_load_to_a_virtual_device_and_pinned_memory(tmp_path):
    body = (
        "local = int(os.environ['LOCAL_RANK'])\n"
        "torch.cuda.set_device(local)\n"
        "path = os.path.join(os.path.dirname(__file__), 'ckpt.pt')\n"
        "m = torch.nn.Linear(4, 2).cuda()\n"
        "dist.broadcast(m.weight.data, src=0)\n"
        "if dist.get_rank() == 0:\n"
        "    torch.save(m.state_dict(), path)\n"
        "dist.barrier()\n"
        "sd = torch.load(path, map_location=f'cuda:{local}')\n"
        "assert torch.equal(sd['weight'], m.weight), 'the checkpoint did not come back'\n"
        "x = torch.ones(3).pin_memory().to('cuda', non_blocking=True)\n"
        "assert x.sum().item() == 3.0\n"
        "with torch.cuda.device(1 - local):\n"
        "    assert torch.cuda.current_device() == 1 - local\n"
        "print('ok on rank', dist.get_rank(), torch.cuda.get_device_name())\n"
    )
    assert launched("--nproc-per-node", 2, _script(tmp_path, body)) == 0
    assert (tmp_path / "ckpt.pt").exists()


def test_a_device_the_node_lacks_is_named(tmp_path, capsys):
    body = "x = torch.ones(2, device='cuda:5')\n"
    assert launched("--nproc-per-node", 2, _script(tmp_path, body)) == 1
    assert "invalid device ordinal 5; this virtual node has 2 GPUs" in capsys.readouterr().err


def test_a_module_runs_with_dash_m(tmp_path, monkeypatch, capsys):
    pkg = tmp_path / "trainpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "train.py").write_text(
        "import torch.distributed as dist\n"
        "dist.init_process_group()\n"
        "print(f'{__name__} {__package__} rank {dist.get_rank()} of {dist.get_world_size()}')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert launched("--nnodes", 2, "--nproc-per-node", 1, "-m", "trainpkg.train") == 0
    out = capsys.readouterr().out
    assert "__main__ trainpkg rank 0 of 2" in out and "__main__ trainpkg rank 1 of 2" in out


def test_cluster_options_reach_the_run(tmp_path):
    """A straggler and a slow NIC make the same script slower, in virtual time."""

    def elapsed(*flags) -> float:
        trace = tmp_path / "t.json"
        argv = ["--nnodes", 2, "--nproc-per-node", 1, "--trace", trace, *flags, SCRIPTS / "ddp_train.py"]
        assert launched(*argv, "--out", tmp_path / "l.json") == 0
        events = json.loads(trace.read_text())["traceEvents"]
        return max(e["ts"] + e["dur"] for e in events if e["ph"] == "X")

    base = elapsed()
    assert elapsed("--slow", "1=3") > base
    assert elapsed("--degrade", "n1.nic0,leaf0=10") > base
    assert elapsed("--nic", "hdr") > base  # 200 Gb/s NICs instead of the node's 400


def test_every_rank_draws_from_its_own_generator_as_a_process_would(tmp_path):
    body = (
        "torch.manual_seed(1)\n"
        "dist.barrier()  # the other ranks run here: they must not move this rank's generator\n"
        "x = torch.randn(4, device='cuda')\n"
        "xs = [torch.zeros(4) for _ in range(dist.get_world_size())]\n"
        "dist.all_gather(xs, x)\n"
        "assert all(torch.equal(xs[0], y) for y in xs), 'the ranks drew different numbers'\n"
        "assert torch.equal(x, torch.randn(4, generator=torch.Generator().manual_seed(1)))\n"
        "w = torch.nn.Linear(3, 3).weight.detach().clone()  # drawn after the seed's first 4 numbers\n"
        "ws = [torch.zeros(3, 3) for _ in range(dist.get_world_size())]\n"
        "dist.all_gather(ws, w)\n"
        "assert all(torch.equal(ws[0], y) for y in ws), 'the ranks made different models'\n"
        "torch.manual_seed(2)\n"
        "d = torch.nn.Dropout(0.3)(torch.ones(64))\n"
        "torch.nn.functional.dropout(torch.ones(3), 0.3, training=False)\n"
        "g = torch.Generator().manual_seed(2)\n"
        "want = torch.ones(64) * torch.empty(64).bernoulli_(0.7, generator=g).div_(0.7)\n"
        "assert torch.equal(d, want), 'dropout did not draw from the rank generator'\n"
    )
    with (
        torch.random.fork_rng()
    ):  # the mask the script expects is torch's own dropout's, in a process seeded 2
        torch.manual_seed(2)
        real = torch.nn.functional.dropout(torch.ones(64), 0.3)
        g = torch.Generator().manual_seed(2)
        assert torch.equal(real, torch.ones(64) * torch.empty(64).bernoulli_(0.7, generator=g).div_(0.7))
    seed = torch.initial_seed()
    assert launched("--nproc-per-node", 4, _script(tmp_path, body)) == 0
    assert torch.initial_seed() == seed  # the process's own generator is not the ranks'
