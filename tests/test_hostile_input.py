"""Hostile input (issue 42): every number is checked by one helper (``cliargs.finite``), every
command line refuses nonsense in one line with exit status 2, and each kind of failure has one
error class."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch

import mycollectives as mc
from mycollectives import virtual
from mycollectives.cliargs import finite, from_env
from mycollectives.topology import cluster
from mycollectives.transport import TransportDeadlock

ROOT = Path(__file__).resolve().parents[1]
T = 300

CALC = ["mycollectives.steptime.calculator", "--model", "llama3_8b", "--tp", "8"]
CASES = [
    (
        [*CALC, "--cluster", "dgx_h100:2", "--tflops", "nan"],
        "argument --tflops: expected a finite number > 0",
    ),
    (
        [*CALC, "--cluster", "dgx_h100:2", "--tflops", "inf"],
        "argument --tflops: expected a finite number > 0",
    ),
    ([*CALC, "--cluster", "dgx_h100:2", "--tflops", "1e-30"], "--tflops: expected a rate from"),
    ([*CALC, "--cluster", "dgx_h100:1000000000"], "--cluster: expected NODE:NODES with NODES an integer"),
    ([*CALC, "--cluster", "dgx_h100:2", "--batch", "1" + "0" * 30], "argument --batch: expected an integer"),
    ([*CALC, "--cluster", "dgx_h100:2", "--overlap", "data=nan"], "--overlap: expected KIND=FRACTION"),
    (["mycollectives.sim.expect", "-b", "99999999999999999999G"], "more bytes than a tensor can hold"),
    (["mycollectives.sim.expect", "--oversubscription", "nan"], "argument --oversubscription: expected"),
    (["mycollectives.sim.expect", "--oversubscription", "inf"], "argument --oversubscription: expected"),
]


@pytest.mark.multiprocess
@pytest.mark.timeout(600)
@pytest.mark.parametrize("argv,line", CASES, ids=[" ".join(c[0][-2:]) for c in CASES])
def test_a_command_line_refuses_nonsense_in_one_line_with_status_2(argv, line):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONWARNINGS": "ignore"}
    out = subprocess.run([sys.executable, "-m", *argv], capture_output=True, text=True, timeout=500, env=env)
    assert out.returncode == 2, (out.returncode, out.stdout[-500:], out.stderr[-2000:])
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and line in lines[0] and "error:" in lines[0], out.stderr
    assert out.stdout == ""


@pytest.mark.parametrize("value", [True, "3", None, float("nan"), float("inf"), -1.0, 0.0])
def test_finite_refuses_what_is_not_a_finite_number_in_range_naming_it(value):
    with pytest.raises(
        (TypeError, ValueError), match=r"^where: argument 'x' must be a finite number > 0, got"
    ):
        finite(value, "x", above=0, where="where")


def test_finite_keeps_integers_within_int64_and_reads_variables():
    assert finite(7, "n", least=1, integer=True) == 7
    with pytest.raises(ValueError, match="argument 'n' must be an integer >= 1"):
        finite(2**63, "n", least=1, integer=True)
    with pytest.raises(TypeError):
        finite(2.0, "n", least=1, integer=True)
    assert from_env("V", 5.0, {}) == 5.0
    assert from_env("V", 5.0, {"V": "2.5"}, above=0) == 2.5


@pytest.mark.parametrize(
    "kw,match",
    [
        (dict(args="ab"), "argument 'args' must be a tuple"),
        (dict(timeout=True), "argument 'timeout' must be a finite number > 0"),
        (dict(protocol=None), "protocol must be one of"),
        (dict(setup=5), "argument 'setup' must be a list of callables"),
        (dict(nodes=2, oversubscription=float("nan")), "argument 'oversubscription' must be a finite number"),
        (dict(nodes=2, oversubscription=float("inf")), "argument 'oversubscription' must be a finite number"),
        (dict(slow={0: float("nan")}), r"argument 'slow\[0\]' must be a finite number > 0"),
        (dict(nodes=True), "argument 'nodes' must be an integer >= 1"),
    ],
)
def test_virtual_run_refuses_bad_arguments_in_one_line(kw, match):
    kw.setdefault("world_size", 2) if "nodes" not in kw else None
    with pytest.raises((TypeError, ValueError), match=match):
        virtual.run(lambda r, *a: None, **kw)


def test_roofline_of_refuses_a_dtype_given_as_a_string():
    with pytest.raises(TypeError, match="argument 'dtype' must be a torch.dtype"):
        virtual.roofline_of(cluster("dgx_h100", 1), "bfloat16")
    assert virtual.roofline_of(cluster("dgx_h100", 1), torch.bfloat16).peak_flops > 10 * (
        virtual.roofline_of(cluster("dgx_h100", 1), torch.float32).peak_flops
    )


def _huge(rank):
    virtual.compute(seconds=1e308)


def test_compute_past_a_finite_clock_is_refused_naming_the_rank():
    with pytest.raises(ValueError, match="virtual.compute on rank 1: .* past any finite time"):
        virtual.run(_huge, world_size=2, slow={1: 2.0}, timeout=T)


def test_transport_deadlock_is_a_deadlock_error():
    assert issubclass(TransportDeadlock, mc.DeadlockError)
    try:
        raise TransportDeadlock("rank 0 waits")
    except mc.DeadlockError as e:
        assert "rank 0 waits" in str(e)


def _mismatch(rank):
    if rank == 0:
        mc.send(torch.ones(4), 1)
    else:
        mc.recv(torch.ones(8), 0)


def test_a_size_mismatch_names_the_sender():
    with pytest.raises(ValueError, match="a message of 4 elements from rank 0 met a receive of 8"):
        virtual.run(_mismatch, world_size=2, timeout=T)


def _from_a_thread(rank):
    errors = []

    def inner():
        try:
            mc.all_reduce(torch.ones(2))
        except Exception as e:  # noqa: BLE001 - the test reads it
            errors.append(e)

    t = threading.Thread(target=inner)
    t.start()
    t.join()
    return errors


def test_a_user_thread_inside_a_rank_is_told_to_pass_its_group():
    run = virtual.run(_from_a_thread, world_size=2, timeout=T)
    for errors in run.results:
        assert len(errors) == 1 and isinstance(errors[0], ValueError)
        assert "no group given" in str(errors[0]) and "pass group=" in str(errors[0])


def _hier(rank):
    x = torch.full((16,), float(rank + 1))
    mc.all_reduce(x, algorithm="hierarchical")
    return x[0].item()


@pytest.mark.parametrize("p", [2, 3, 5])
def test_hierarchical_runs_on_part_of_one_node(p):
    assert virtual.run(_hier, world_size=p, timeout=T).results == [p * (p + 1) / 2] * p
