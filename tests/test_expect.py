"""The expected-busbw calculator: its command line is a contract (names, options, the last line)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from mycollectives.sim.expect import collective_name, expect, main

LAST = re.compile(r"^busbw: (\d+\.\d) GB/s$")


def _run(capsys, *argv) -> list[str]:
    assert main(list(argv)) == 0
    return capsys.readouterr().out.strip().splitlines()


@pytest.mark.multiprocess
@pytest.mark.timeout(120)
def test_the_documented_command():
    cmd = [sys.executable, "-m", "mycollectives.sim.expect", "--node", "dgx_h100", "--nodes", "4",
           "--nics-per-node", "8", "--nic", "ndr", "-C", "all_reduce", "-b", "8G"]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=100, check=True).stdout.splitlines()
    m = LAST.match(out[-1])
    assert m and 340 < float(m.group(1)) < 380  # 4 x 8 H100 with 8 NDR NICs: about 365 published
    assert any(line.startswith("NCCL would run: Ring / Simple") for line in out)
    assert any("link-by-link bound" in line for line in out)


@pytest.mark.parametrize("node", ["dgx_a100", "dgx_h100", "dgx_h200", "dgx_b200", "gb200_nvl72"])
@pytest.mark.parametrize("nic", ["hdr", "ndr", "xdr"])
def test_every_node_and_nic(capsys, node, nic):
    out = _run(capsys, "--node", node, "--nodes", "2", "--nic", nic, "-C", "all_reduce", "-b", "1G")
    assert LAST.match(out[-1]) and float(LAST.match(out[-1]).group(1)) > 0


def test_forcing_and_names(capsys):
    out = _run(
        capsys,
        "--node",
        "dgx_h100",
        "--nodes",
        "2",
        "--algorithm",
        "ring",
        "-C",
        "all_reduce_perf",
        "-b",
        "8G",
    )
    assert "forced: Ring / Simple" in "\n".join(out)
    out = _run(capsys, "--node", "dgx_a100", "--nodes", "2", "--nics-per-node", "4", "--nic", "hdr", "-C",
               "alltoall", "-b", "4G")  # fmt: skip
    assert float(LAST.match(out[-1]).group(1)) == pytest.approx(22.5, abs=0.1)
    out = _run(capsys, "--node", "dgx_h100", "-C", "all_gather", "-b", "1M", "-e", "1G", "-f", "32")
    assert len([line for line in out if re.match(r"^\s+\d+ ", line)]) == 2  # the sweep, then the last size
    assert out[-6].startswith("size: 1073741824 bytes")
    assert (
        collective_name("reduce_scatter_perf") == "reduce_scatter" and collective_name("bcast") == "broadcast"
    )


def test_more_nics_never_slow_a_ring_down():
    four = expect("all_reduce", "8G", "dgx_a100", nodes=4, nics_per_node=4, nic="hdr", algorithm="Ring").busbw
    eight = expect(
        "all_reduce", "8G", "dgx_a100", nodes=4, nics_per_node=8, nic="hdr", algorithm="Ring"
    ).busbw
    assert eight > 1.9 * four > 0


def test_bad_arguments(capsys):
    assert main(["--node", "dgx_h100", "--nodes", "2", "--nics-per-node", "3"]) == 2
    assert "nics_per_node=3" in capsys.readouterr().err
    assert main(["-C", "gather"]) == 2
    assert main(["--algorithm", "bruck"]) == 2
    with pytest.raises(SystemExit):
        main(["--node", "dgx_v100"])
