"""The lab scripts, launched as a learner would (torchrun, gloo, 2-4 CPU processes).

Each script asserts its own results against a single-process reference (DDP,
ZeRO-3, pipeline and MoE) or an exact sum (all-reduce); a test here passes
when every rank exits cleanly and rank 0 wrote its results. Sizes are tiny and
world sizes odd where that matters (padding, uneven splits). The parsers of
lab 8 are tested on short made-up excerpts in the format of their tools.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from labs.scripts.launch import torchrun
from labs.scripts.nodeinfo import parse_nccl_log, parse_topo_matrix
from labs.scripts.pipeline import schedule

LABS = Path(__file__).resolve().parents[1] / "labs"

CPU = {"MYCOLLECTIVES_DEVICE": "cpu", "MYCOLLECTIVES_TIMEOUT": "60"}


def run(script: str, nproc: int, *args: str) -> dict:
    return torchrun(script, *args, nproc=nproc, env=CPU, timeout=120, echo=False)


@pytest.mark.multiprocess
@pytest.mark.timeout(150)
def test_pingpong_every_pair():
    res = run("pingpong.py", 3, "--max-bytes", "65536", "--reps", "2")
    assert [tuple(pq) for pq in res["pairs"]] == [(0, 1), (0, 2), (1, 2)]
    assert all(t > 0 for row in res["times"] for t in row)
    bw = res["bw_matrix"]
    assert all(bw[i][j] == bw[j][i] > 0 for i in range(3) for j in range(3) if i != j)


@pytest.mark.multiprocess
@pytest.mark.timeout(150)
def test_ddp_gradients_match_reference():
    res = run("ddp.py", 2, "--width", "48", "--depth", "3", "--steps", "1")
    assert "BucketedDDP 1 bucket(s) overlap" in res["times"]
    assert 0.0 <= res["overlap_fraction"] <= 1.0


@pytest.mark.multiprocess
@pytest.mark.timeout(150)
def test_fsdp_equals_ddp_with_padding():
    res = run("fsdp.py", 3, "--width", "30", "--depth", "2", "--steps", "3")
    assert res["n_params"] % 3 != 0  # the flat vector needed padding
    assert len(res["fsdp_loss"]) == 3


@pytest.mark.multiprocess
@pytest.mark.timeout(150)
def test_pipeline_gpipe_and_1f1b():
    res = run("pipeline.py", 3, "--width", "32", "--micro", "4", "--micro-batches", "1", "3", "5")
    kinds = {(r["schedule"], r["m"]) for r in res["sweep"]}
    assert kinds == {(k, m) for k in ("gpipe", "1f1b") for m in (1, 3, 5)}


@pytest.mark.multiprocess
@pytest.mark.timeout(150)
def test_moe_uneven_all_to_all():
    res = run("moe.py", 3, "--tokens", "24", "--hidden", "16", "--experts-per-rank", "1", "2")
    for r in res["results"]:
        assert sum(r["loads"]) == 3 * 24 * r["k"]


@pytest.mark.multiprocess
@pytest.mark.timeout(150)
def test_ring_and_hierarchical_all_reduce():
    res = run("allreduce_topo.py", 4, "--local-size", "2", "--max-bytes", "4096")
    assert {r["algorithm"] for r in res["rows"]} == {"ring", "hierarchical", "gloo (native)"}


@pytest.mark.parametrize("p", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("m", [1, 2, 5, 8])
def test_schedules_do_each_micro_batch_once(p, m):
    for kind in ("gpipe", "1f1b"):
        for s in range(p):
            acts = schedule(kind, m, p, s)
            assert sorted(acts) == sorted([("F", i) for i in range(m)] + [("B", i) for i in range(m)])
            assert all(acts.index(("F", i)) < acts.index(("B", i)) for i in range(m))


# Made-up excerpts in the format of `nvidia-smi topo -m` and NCCL_DEBUG=INFO,
# to exercise the parsers; not the output of a real machine.
TOPO = """\
\tGPU0\tGPU1\tGPU2\tCPU Affinity\tNUMA Affinity
GPU0\t X \tNV4\tSYS\t0-15\t0
GPU1\tNV4\t X \tPHB\t0-15\t0
GPU2\tSYS\tPHB\t X \t16-31\t1

Legend:
  X    = Self
"""

NCCL = """\
host:1:1 [0] NCCL INFO NCCL version 2.99.0+cuda99.0
host:1:1 [0] NCCL INFO Using network Socket
host:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM
host:1:2 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via SHM/direct/direct
host:1:2 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via P2P/CUMEM
"""


def test_parse_topo_matrix():
    links = parse_topo_matrix(TOPO)
    assert links[0, 1] == links[1, 0] == "NV4"
    assert links[0, 2] == "SYS" and links[1, 2] == "PHB"
    assert len(links) == 6
    assert parse_topo_matrix("no GPUs here") == {}


def test_parse_nccl_log():
    log = parse_nccl_log(NCCL)
    assert log["version"] == "2.99.0+cuda99.0" and log["network"] == "Socket"
    assert log["hops"][0] == (0, 0, 1, "P2P/CUMEM")
    assert log["transports"] == {"P2P": 2, "SHM": 1} and log["channels"] == 2
    assert parse_nccl_log("")["hops"] == []


def test_parse_nccl_log_on_cited_excerpts():
    """Real logs posted in issue threads (labs/recorded/nccl_info, cited in chapter 6)."""
    logs = LABS / "recorded" / "nccl_info"
    a800 = parse_nccl_log((logs / "a800_two_nodes_roce.log").read_text())
    assert a800["version"] == "2.10.3+cuda11.0" and a800["network"] == "IB"
    assert a800["transports"] == {"P2P": 6, "NET": 2} and a800["gdr"] == 2
    assert (1, 13, 4, "NET/IB/0/GDRDMA") in a800["hops"] and (1, 14, 13, "P2P/direct pointer/read") in a800[
        "hops"
    ]
    loc = parse_nccl_log((logs / "rtx_a6000_p2p_level_loc.log").read_text())
    assert loc["p2p_level"] == "LOC" and loc["transports"] == {"SHM": 1} and loc["network"] == "Socket"
    h800 = parse_nccl_log((logs / "h800_channels.log").read_text())
    assert h800["channel_counts"] == dict(coll=16, collnet=0, nvls=16, p2p=16)
    gh = parse_nccl_log((logs / "gh200_two_nodes.log").read_text())
    assert (gh["ranks"], gh["nodes"]) == (2, 2)
    assert parse_nccl_log((logs / "tuning_algo_proto.log").read_text())["choices"] == [
        (1026048, "Ring", "Simple")
    ]
    assert parse_nccl_log("AllReduce: 4096 Bytes -> Algo NVLS proto LL128")["choices"] == [
        (4096, "NVLS", "LL128")
    ]
