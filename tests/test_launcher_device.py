"""The virtual GPU as a CUDA script sees it: where tensors say they are, and what synchronize waits for.

A rank's tensors live on the CPU underneath; to the script's own code they
read as on the GPU it named (``mycollectives/virtual/devices.py``).

On a GPU, ``torch.cuda.synchronize()`` waits for every stream of the device,
NCCL's included, so it waits for an async collective no one has waited for;
the compute stream's ``synchronize`` (and an event on it) does not, since
only ``work.wait()`` orders the two streams. The runs here check the same in
virtual time.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from mycollectives import virtual
from mycollectives.virtual import launch, maestro
from mycollectives.virtual.cudapatch import setup_gpu

SCRIPTS = Path(__file__).parent / "launcher_scripts"
pytestmark = pytest.mark.timeout(120)
BIG = 1 << 22  # 16 MiB of float32: a collective far longer than the event's own cost


def _times(rank: int, how: str) -> dict[str, float]:
    """Virtual clock (s) once the async all_reduce was posted, after ``how`` synchronized, after wait()."""
    with setup_gpu(rank, 2, "H100 (virtual)"):
        dist.init_process_group("nccl")
        torch.cuda.set_device(rank)
        x = torch.ones(BIG, device="cuda")
        clock = maestro.current
        work = dist.all_reduce(x, async_op=True)
        posted = clock().clock  # the host is back at once: the call runs on a stream
        if how == "device":
            torch.cuda.synchronize()
        elif how == "accelerator":
            torch.accelerator.synchronize()
        elif how == "stream":
            torch.cuda.current_stream().synchronize()
        else:
            event = torch.cuda.Event()
            event.record()
            event.synchronize()
        synced = clock().clock
        work.wait()
        waited = clock().clock
        assert x[0].item() == 2.0
        dist.destroy_process_group()
        return {"posted": posted, "synced": synced, "waited": waited}


def _run(how: str):
    return virtual.run(lambda rank: _times(rank, how), virtual.topology_of("dgx_h100"), world_size=2)


@pytest.mark.parametrize("how", ["device", "accelerator"])
def test_synchronize_waits_for_an_async_collective(how):
    run = _run(how)
    for rank, t in enumerate(run.results):
        (end,) = [s[3] for s in run.call_spans if s[0] == rank and s[1] == "stream"]
        assert t["posted"] < end
        assert t["synced"] == end  # the clock moved to the collective's end
        assert t["waited"] == end  # and wait() after it costs nothing more


@pytest.mark.parametrize("how", ["stream", "event"])
def test_the_compute_streams_synchronize_does_not(how):
    run = _run(how)
    for rank, t in enumerate(run.results):
        (end,) = [s[3] for s in run.call_spans if s[0] == rank and s[1] == "stream"]
        assert t["synced"] == t["posted"] < end  # as on a GPU: NCCL's stream is another stream
        assert t["waited"] == end


@pytest.mark.parametrize("nodes", [1, 2])
def test_tensors_read_as_on_the_gpu_the_script_named(nodes, tmp_path):
    out = tmp_path / "seen.json"
    argv = ["--quiet", "--nnodes", nodes, "--nproc-per-node", 2, SCRIPTS / "device_checks.py", out]
    assert launch.main(list(map(str, argv))) == 0
    seen = json.loads(out.read_text())
    assert len(seen) == 2 * nodes
    for rank, s in enumerate(seen):
        i = rank % 2
        gpu, host = [f"cuda:{i}", "cuda", True, False, i], ["cpu", "cpu", False, True, -1]
        assert s["current"] == 0  # .to(i) without set_device: tensors on cuda:i, current device still 0
        assert s["to_int"] == s["param"] == s["output"] == gpu and s["same"]
        assert s["ways"] == dict.fromkeys(["cuda()", "to(str)", "to(device)", "factory", "to(dtype)"], gpu)
        assert s["cpu()"] == [*host, host, gpu, gpu]  # .cpu() is a copy; .cuda() of it reads the GPU again
        assert s["to_cpu"] == host + host and s["values"]
        assert s["ledger"] == [4096, 0, 4096]  # the GPU's tensor is in its memory ledger, a host copy not
    assert "device" not in vars(torch.Tensor) and torch.ones(1).device.type == "cpu"  # put back


def test_a_run_past_its_wall_clock_limit_is_one_clear_line(tmp_path, capsys):
    script = tmp_path / "slow.py"
    script.write_text(
        "import time, torch.distributed as dist\n"
        "dist.init_process_group('nccl')\n"
        "for _ in range(200):\n"
        "    time.sleep(0.02)  # wall time the virtual clock does not see\n"
        "    dist.barrier()\n"
    )
    assert launch.main(["--quiet", "--nproc-per-node", "2", "--timeout", "0.5", str(script)]) == 1
    err = capsys.readouterr().err.strip()
    assert "virtual run still going after 0.5 s of wall time" in err and "--timeout" in err
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize(
    ("cluster", "capability", "gb"),
    [("dgx_a100", (8, 0), 80), ("dgx_h200", (9, 0), 141), ("dgx_b200", (10, 0), 180)],
)
def test_the_device_reports_its_gpus_capability_and_memory(cluster, capability, gb, tmp_path, capsys):
    """A script that checks the capability (bf16, FP8) or sizes its batch by free memory sees the GPU of
    the cluster it runs on; free memory is the GPU's less what the rank's tensors hold."""
    script = tmp_path / "props.py"
    script.write_text(
        "import torch\nx = torch.ones(1 << 20, device='cuda')\nfree, total = torch.cuda.mem_get_info()\n"
        "p = torch.cuda.get_device_properties(0)\n"
        "print('props', torch.cuda.get_device_capability(), p.major, p.minor, total, total - free)\n"
    )
    assert launch.main(["--quiet", "--cluster", cluster, "--nproc-per-node", "1", str(script)]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("props"))
    assert line == f"props {capability} {capability[0]} {capability[1]} {gb * 10**9} {4 << 20}", line
