"""The step-time calculator's command line: the chapter's table, the search, one line on bad input."""

from __future__ import annotations

import pytest

from mycollectives.steptime.calculator import main, step_time
from mycollectives.steptime.config import LLAMA3_70B
from mycollectives.steptime.layout import Layout
from mycollectives.topology import cluster


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_one_layout_prints_the_table_the_chapter_prints(capsys):
    code, out, err = run(
        capsys,
        "--model",
        "llama3_70b",
        "--cluster",
        "dgx_h100:16",
        "--tp",
        "8",
        "--pp",
        "4",
        "--microbatches",
        "8",
    )
    lay = Layout(tp=8, sp=True, pp=4, dp=4, microbatches=8)
    want = step_time(LLAMA3_70B, lay, cluster("dgx_h100", 2)).table()
    assert (code, err) == (0, "")
    assert out.strip() == want
    assert "128 GPUs, 16 nodes of 8" in out and "MFU" in out


def test_a_layout_that_does_not_fit_says_so_instead_of_an_mfu(capsys):
    code, out, _ = run(capsys, "--model", "llama3_70b", "--cluster", "dgx_h100:16", "--tp", "8", "--pp", "2")
    assert code == 0
    assert "does not fit: 82 GB of 80" in out and "MFU" not in out


def test_options_reach_the_layout_and_the_overlap(capsys):
    base = ["--model", "llama3_8b", "--cluster", "dgx_h100:8", "--zero", "3", "--batch", "512"]
    _, hidden, _ = run(capsys, *base)
    _, half, _ = run(capsys, *base, "--overlap", "fsdp=0.5")
    assert "dp64 zero3, 8 micro-batches" in hidden
    step = [line for line in (hidden + half).splitlines() if line.startswith("compute")]
    assert step[0] != step[1]  # half of FSDP's calls exposed: a longer step
    _, full, _ = run(capsys, *base, "--recompute", "full", "--no-sp")
    assert "full recompute" in full


def test_search_lists_layouts_that_fit_fastest_first(capsys):
    code, out, _ = run(
        capsys,
        "--model",
        "llama3_70b",
        "--cluster",
        "dgx_h100:64",
        "--batch",
        "512",
        "--search",
        "--top",
        "3",
    )
    lines = out.strip().splitlines()
    assert code == 0 and lines[0].startswith("layout") and lines[-1].endswith("the fastest 3 shown")
    steps = [float(line[66:74]) for line in lines[1:4]]
    assert steps == sorted(steps) and len(steps) == 3
    # at the sustained MFU (not the peak) full recomputation costs more than it saves: a TP4 layout wins
    assert "tp4+sp dp128 zero3, 4 micro-batches, selective recompute" in lines[1]
    gb = [int(line[80:85]) for line in lines[1:4]]
    assert max(gb) <= 80


def test_search_grids_take_comma_lists(capsys):
    code, out, _ = run(
        capsys,
        "--model",
        "llama3_8b",
        "--cluster",
        "dgx_h100:8",
        "--batch",
        "64",
        "--search",
        "--tp",
        "2,4",
        "--pp",
        "1",
    )
    body = out.strip().splitlines()[1:-1]
    assert code == 0 and body and all(line.startswith(("tp2+sp dp32", "tp4+sp dp16")) for line in body)


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--cluster", "dgx_h100:16"], "--model"),
        (["--model", "llama3_99b", "--cluster", "dgx_h100:16"], "invalid choice"),
        (["--model", "llama3_70b", "--cluster", "dgx_h100"], "NODE:NODES"),
        (["--model", "llama3_70b", "--cluster", "dgx_b300:2"], "node must be one of"),
        (["--model", "llama3_70b", "--cluster", "dgx_h100:16", "--tp", "3"], "does not divide"),
        (["--model", "llama3_70b", "--cluster", "dgx_h100:16", "--tp", "2,4"], "needs --search"),
        (["--model", "llama3_70b", "--cluster", "dgx_h100:16", "--tp", "x"], "expected an integer"),
        (["--model", "llama3_70b", "--cluster", "dgx_h100:16", "--tp", "0"], "at least 1"),
        (["--model", "llama3_70b", "--cluster", "dgx_h100:16", "--pp", "-2"], "at least 1"),
        (["--model", "llama3_70b", "--cluster", "dgx_h100:0"], "NODE:NODES"),
        (
            ["--model", "llama3_70b", "--cluster", "dgx_h100:16", "--seq", "0"],
            "--seq: expected an integer >= 1",
        ),
        (["--model", "llama3_70b", "--cluster", "dgx_h100:16", "--tflops", "-1"], "--tflops"),
        (["--model", "llama3_70b", "--cluster", "dgx_h100:16", "--dp", "3"], "but the cluster has 128"),
        (["--model", "llama3_8b", "--cluster", "dgx_h100:8", "--tp", "64"], "heads"),
        (["--model", "llama3_70b", "--cluster", "dgx_h100:16", "--zero", "5"], "zero must be"),
        (["--model", "llama3_70b", "--cluster", "dgx_h100:16", "--batch", "100"], "--batch 100"),
        (["--model", "llama3_70b", "--cluster", "dgx_h100:16", "--overlap", "fsdp=2"], "fraction"),
        (["--model", "llama3_70b", "--cluster", "dgx_h100:16", "--overlap", "tp=1"], "kind must be"),
        (["--model", "llama3_70b", "--cluster", "dgx_h100:16", "--search"], "needs --batch"),
    ],
)
def test_bad_input_is_one_line_and_status_2(capsys, argv, says):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("calculator: error: ") and says in err, err
