"""Issue 33 item 7: the command lines refuse nonsense in one line, exit
status 2; the package's environment variables never break its import."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mycollectives.bench import cli as bench
from mycollectives.sim import expect

ROOT = Path(__file__).resolve().parents[1]


def _refused(main, argv: list[str], capsys) -> str:
    """The one line ``main`` printed, after returning 2 or exiting with status 2."""
    try:
        status = main(argv)
    except SystemExit as e:
        status = e.code
    assert status == 2, (argv, status)
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "error:" in err and "Traceback" not in err, err
    return err


@pytest.mark.parametrize(
    "argv, said",
    [
        ("--oversubscription nan", "--oversubscription"),
        ("--oversubscription inf", "--oversubscription"),
        ("--nodes 1000000000", "--nodes"),
        ("--nodes 0", "--nodes"),
        ("--gpus 0", "--gpus"),
        ("--gpus-per-node 0", "--gpus-per-node"),
        ("--nics-per-node 0", "--nics-per-node"),
        ("-b 0", "size"),
        ("-f 1 -e 16G", "--stepfactor"),
        ("-C all_to_all --algorithm Tree", "NCCL does not run it for all_to_all"),
        ("-C all_to_all --protocol LL", "NCCL does not run it for all_to_all"),
    ],
)
def test_expect_refuses_nonsense_in_one_line(argv, said, capsys):
    assert said in _refused(expect.main, argv.split(), capsys)


@pytest.mark.parametrize(
    "argv, said",
    [
        ("-b abc", "-b/--minbytes"),
        ("-e 1x", "-e/--maxbytes"),
        ("-b 1M -e 1K", "min bytes <= max bytes"),
        ("-f 1", "factor"),
        ("-i -1", "-i/--stepbytes"),
        ("-r 5 --nprocs 2", "-r/--root"),
        ("-r -1", "-r/--root"),
        ("--algorithm nope", "--algorithm"),
        ("--algorithm ,", "--algorithm"),
        ("-c 2", "-c/--check"),
        ("--nprocs -1", "--nprocs"),
        ("--threads -1", "--threads"),
        ("--progress 5", "--progress"),
        ("-n 0", "-n/--iters"),
        ("-b 3 -e 3 -d float", "whole number of float elements"),
        ("-b 4 -e 8 -i 2 -d float", "-i/--stepbytes"),
    ],
)
def test_bench_refuses_nonsense_in_one_line_before_any_process(argv, said, capsys, monkeypatch):
    for var in ("RANK", "WORLD_SIZE"):
        monkeypatch.delenv(var, raising=False)
    assert said in _refused(bench.main, argv.split(), capsys)


@pytest.mark.multiprocess
@pytest.mark.timeout(120)
def test_bench_as_a_command_prints_one_line_and_exits_2():
    done = subprocess.run(
        [sys.executable, "-m", "mycollectives.bench", "--nprocs", "2", "-b", "3", "-e", "3", "-d", "float"],
        capture_output=True, text=True, timeout=100, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr


@pytest.mark.multiprocess
@pytest.mark.timeout(120)
@pytest.mark.parametrize("value", ["abc", "-3"])
def test_a_bad_flight_size_warns_and_import_goes_on(value):
    code = "import mycollectives.flight as f; print(f._size)"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=100, cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "MYCOLLECTIVES_FLIGHT_SIZE": value},
    )  # fmt: skip
    assert done.returncode == 0 and done.stdout.strip() == "2000", done.stderr
    assert "MYCOLLECTIVES_FLIGHT_SIZE" in done.stderr, done.stderr
