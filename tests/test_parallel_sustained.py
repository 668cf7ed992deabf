"""The step-time calculator's default compute rate: a sustained MFU fitted on llm-foundry's runs, said
next to every MFU, and the framework-level runs it is checked against (held out of the fit)."""

from __future__ import annotations

import statistics

import pytest

from mycollectives.steptime import calculator
from mycollectives.steptime.published_runs import RUNS
from mycollectives.steptime.sustained import LLM_FOUNDRY_H100_BF16_MFU, SUSTAINED, Sustained

# What the calculator gave each run when the default was fitted (tokens/s per GPU): a regression guard.
MEASURED = {"torchtitan-8b-128xh100": 6444, "torchtitan-8b-8xh100": 6444, "torchtitan-8b-64xa100": 2032}


def test_the_default_is_the_median_of_llm_foundrys_runs_and_says_so():
    assert len(LLM_FOUNDRY_H100_BF16_MFU) == 52
    assert SUSTAINED.mfu == pytest.approx(statistics.median(LLM_FOUNDRY_H100_BF16_MFU) / 100)
    assert "torchtitan held out" in SUSTAINED.source


def test_torchtitans_8b_run_on_128_h100_is_within_20_percent_with_default_flags():
    run = next(r for r in RUNS if r.id == "torchtitan-8b-128xh100")
    report = run.predict()
    got = report.tokens / report.step / report.layout.world
    assert abs(got / run.tokens_per_gpu_s - 1) <= 0.20, got
    assert "assumed:" in report.verdict() and "llm-foundry" in report.verdict()


@pytest.mark.parametrize("run", RUNS, ids=[r.id for r in RUNS])
def test_each_published_run_is_priced_as_when_it_was_measured(run):
    report = run.predict()
    got = report.tokens / report.step / report.layout.world
    assert got == pytest.approx(MEASURED[run.id], rel=0.01), got


@pytest.mark.parametrize("bad", [0, 0.0, 1.5, -0.2, True])
def test_an_mfu_outside_0_to_1_is_refused_naming_it(bad):
    with pytest.raises(ValueError, match=r"^mfu: expected an efficiency in \(0, 1\]"):
        Sustained(bad, "test")


def test_the_cli_labels_its_output_and_names_the_bad_flag(capsys):
    args = ["--model", "llama3_8b", "--cluster", "dgx_h100:16", "--zero", "3", "--micro-batch", "2"]
    assert calculator.main(args) == 0
    out = capsys.readouterr().out
    assert "modelled, not measured" in out and "at 39.8 % MFU, assumed:" in out
    assert calculator.main([*args, "--mfu", "0.33"]) == 0
    assert "at 33.0 % MFU, assumed: given (--mfu)" in capsys.readouterr().out
    assert calculator.main([*args, "--mfu", "1.2"]) == 2
    assert "--mfu: expected an efficiency in (0, 1]" in capsys.readouterr().err
