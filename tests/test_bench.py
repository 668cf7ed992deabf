"""The benchmark: nccl-tests' vocabulary and format, arguments, the model fit,
and one tiny real two-process run (performance itself is measured by
``benchmarks/record.sh``, never asserted here)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import mycollectives as mc
from mycollectives.bench import busbw_factor, parse_size, sizes
from mycollectives.bench.cli import algorithm_list, parser
from mycollectives.bench.factors import bandwidths
from mycollectives.bench.predicted import (
    compare,
    fit_held_out,
    fit_results,
    measured_us,
    median_error,
    schedule_of,
)
from mycollectives.bench.report import header, parse_table, row, time_str, write_json
from mycollectives.bench.runner import Result
from mycollectives.collectives import record
from mycollectives.cost import Machine
from mycollectives.cost.cpu import CpuModel
from mycollectives.cost.fit import Textbook, counts, describe, model_time

ROOT = Path(__file__).resolve().parents[1]

# A row as nccl-tests' all_reduce_perf prints it (8 ranks), for the layout.
NCCL_TESTS_ROW = (
    "     1048576        262144     float     sum      -1    55.23   18.98   33.22      0"
    "    54.70   19.17   33.55      0"
)


@pytest.mark.parametrize("n", [2, 3, 4, 8])
def test_busbw_factors_are_nccl_tests(n):
    assert busbw_factor("all_reduce", n) == pytest.approx(2 * (n - 1) / n)
    for c in ("all_gather", "reduce_scatter", "all_to_all"):
        assert busbw_factor(c, n) == pytest.approx((n - 1) / n)
    assert busbw_factor("broadcast", n) == busbw_factor("reduce", n) == 1.0


def test_bandwidths_in_gb_per_s():
    algbw, busbw = bandwidths("all_reduce", 1_000_000_000, 1.0, 4)
    assert algbw == pytest.approx(1.0) and busbw == pytest.approx(1.5)


def test_sizes_and_counts():
    assert parse_size("64K") == 65536 and parse_size("1G") == 1 << 30 and parse_size("8") == 8
    with pytest.raises(ValueError):
        parse_size("lots")
    assert sizes(8, 64, 2) == [8, 16, 32, 64]
    assert sizes(100, 400, step_bytes=100) == [100, 200, 300, 400]
    ag, ar = record("all_gather"), record("all_reduce")
    assert ag.size(ag.spec(3, 1000, 4), 4) == 249 * 4  # 250 elements, rounded to a multiple of 3
    assert ar.size(ar.spec(3, 1000, 4), 4) == 250 * 4


def test_time_field_as_nccl_tests():
    assert time_str(55.234) == "  55.23" and time_str(123.45) == "  123.5" and time_str(12345.6) == "  12346"


def _result(alg="ring", size=1048576, t=55.23, wrong=0, coll="all_reduce", p=8):
    algbw, busbw = bandwidths(coll, size, t * 1e-6, p)
    return Result(coll, alg, size, size // 4, "float", "sum", -1, p, t, algbw, busbw, wrong, [t])


def _made_by(
    model, params, algorithms=("ring", "recursive_doubling", "reduce_broadcast"), exponents=range(16, 25)
):
    """A sweep that the model itself made: 4 ranks, sizes ``2**k``, each
    point's time (and its single calls, which the book's fit reads) as
    ``model`` gives it under ``params``."""
    pts = []
    for alg in algorithms:
        for k in exponents:
            r = _result(alg, 1 << k, 1.0, p=4)
            r.time_us = model_time(model, schedule_of(r), params) * 1e6
            r.calls_us = [r.time_us] * 4
            pts.append(r)
    return pts


def _us(model, alg: str, size: int, params, p: int = 4) -> float:
    return model_time(model, schedule_of(_result(alg, size, 1.0, p=p)), params) * 1e6


def test_row_lines_up_with_nccl_tests_column_by_column():
    ours = row([_result("ring"), _result("native", t=54.70)], ["ring", "native"])
    theirs = NCCL_TESTS_ROW
    assert len(ours) == len(theirs)
    # every field ends where nccl-tests' field ends
    ends = lambda s: [i for i in range(len(s)) if s[i] != " " and (i + 1 == len(s) or s[i + 1] == " ")]  # noqa: E731
    assert ends(ours) == ends(theirs)
    a, b = parse_table(ours)[0], parse_table(theirs)[0]
    assert a[:5] == b[:5] and a[5] == b[5] and a[8] == b[8]


def test_header_names_the_columns_and_algorithms():
    h = header(["ring", "native"]).splitlines()
    assert all(line.startswith("#") for line in h)
    assert h[1].split()[1:] == "size count type redop root".split() + "time algbw busbw #wrong".split() * 2
    assert "ring" in h[0] and "native" in h[0]
    assert row([_result("ring")], ["ring", "native"]).split()[-4:] == ["N/A"] * 4


def test_flags_as_nccl_tests():
    a = parser().parse_args("-b 8 -e 128M -f 2 -n 20 -w 5 -c 0 -o max -d half -r 1".split())
    assert (a.minbytes, a.maxbytes, a.stepfactor, a.iters, a.warmup_iters, a.check) == (
        "8",
        "128M",
        2,
        20,
        5,
        0,
    )
    assert (a.op, a.datatype, a.root) == ("max", "half", 1)
    assert (
        algorithm_list("all", "all_reduce")[0] == "auto"
        and algorithm_list("all", "all_reduce")[-1] == "native"
    )
    assert algorithm_list("native", "broadcast") == ["native"]
    with pytest.raises(SystemExit):
        algorithm_list("ring,nope", "all_reduce")
    from mycollectives.bench.cli import check_counts

    for bad, said in (("-n 0", "-n/--iters: expected at least 1, got 0"), ("--reps 0", "--reps: expected at least 1"),
                      ("-w -1", "-w/--warmup_iters: expected at least 0, got -1")):  # fmt: skip
        with pytest.raises(SystemExit, match=said):
            check_counts(parser().parse_args(bad.split()))
    from mycollectives.bench.flags import check_op

    with pytest.raises(SystemExit, match="-o/--op avg with -d int8: AVG needs a floating-point dtype"):
        check_op(parser().parse_args("-d int8 -o avg".split()))
    check_op(parser().parse_args("-C all_gather -d int8 -o avg".split()))  # no reduction: -o is unused
    from mycollectives.bench.virtual import check_virtual

    for bad, said in (("--virtual dgx_h999", "--virtual: unknown node 'dgx_h999'; expected one of dgx_a100"),
                      ("--virtual dgx_h100 --nprocs 4 --csv x", "--nprocs, --csv: not read with --virtual")):  # fmt: skip
        with pytest.raises(SystemExit, match=said):
            check_virtual(parser(), parser().parse_args(bad.split()))


def test_a_calibration_with_one_rank_is_refused_before_anything_starts(monkeypatch):
    """``--calibrate 1`` ping-pongs ranks 0 and 1: one GPU (world size 1) or
    ``--nprocs 1`` is refused with what to do, not a traceback from a spawned rank."""
    from mycollectives.bench.cli import check_world, main

    check_world(parser().parse_args(["--calibrate", "1"]), 2)  # two ranks: fine
    for var in ("RANK", "WORLD_SIZE"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(SystemExit, match="needs at least 2 ranks .* this run has 1"):
        main(["--nprocs", "1", "--calibrate", "1", "-b", "64K", "-e", "1M"])
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")  # under torchrun, one process
    with pytest.raises(SystemExit, match="this run has 1"):
        main(["--calibrate", "1"])


# the textbook model, and the CPU one (sent plus received bytes, four ranks on two cores)
@pytest.mark.parametrize("model", [Textbook(), CpuModel(cores=2)], ids=["textbook", "cpu"])
def test_the_fit_recovers_a_machine_that_made_the_data(model):
    truth = model.start(Machine(alpha=50e-6, beta=1e-9, gamma=0.5e-9))
    pts = _made_by(model, truth)
    fitted = fit_results(pts, model, model.start(Machine(1e-5, 1e-9, 1e-9)))
    assert fitted == pytest.approx(truth, rel=1e-3)
    assert median_error(compare(pts, model, fitted)) < 1e-6
    assert counts(Textbook(), schedule_of(pts[0]), [1.0, 0, 0])[0] == 6  # ring on 4 ranks: 2(p-1) messages


def test_the_books_held_out_fit_judges_only_the_sizes_it_did_not_see():
    """``fit_held_out``: the recorded sweep's machine and calibration in,
    points back for every other size only, predicted by the fitted parameters."""
    model = CpuModel(cores=2)
    truth = model.start(Machine(alpha=50e-6, beta=1e-9, gamma=0.5e-9))
    pts = _made_by(model, truth)
    meta = {"cores": 2, "calibration": {"alpha": 1e-5, "beta": 1e-9, "gamma": 1e-9}}
    got, fitted, held = fit_held_out(meta, pts)
    assert got == model
    assert sorted({q.size for q in held}) == [1 << k for k in range(17, 25, 2)]
    assert fitted == pytest.approx(truth, rel=1e-3)
    assert median_error(held) < 1e-6


@pytest.mark.multiprocess
@pytest.mark.timeout(180)
@pytest.mark.parametrize("transport,expected", [("auto", "shm"), ("group", "group")])
def test_a_tiny_real_two_process_run(tmp_path, transport, expected):
    """Spawned local processes: ``auto`` moves our bytes through shared memory
    (the 256 KiB size sends messages above the eager limit), ``group``
    through gloo; the transport is in the header and the JSON."""
    out = tmp_path / "r.json"
    cmd = [sys.executable, "-m", "mycollectives.bench", "--nprocs", "2", "-b", "1K", "-e", "256K", "-f", "16",
           "-n", "2", "-w", "1", "--reps", "2", "--algorithm", "ring,auto,native", "--progress", "0",
           "--transport", transport, "--json", str(out)]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=170)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"transport {expected} " in done.stdout.splitlines()[0]
    rows = parse_table(done.stdout)
    assert [int(r[0]) for r in rows] == [1024, 16384, 262144]
    assert all(len(r) == 5 + 4 * 3 for r in rows)
    assert all(r[8] == "0" and r[12] == "0" and r[16] == "0" for r in rows)  # no wrong elements
    data = json.loads(out.read_text())
    assert data["machine"]["backend"] == "gloo" and data["machine"]["world_size"] == 2
    assert data["machine"]["transport"] == expected
    assert {r["algorithm"] for r in data["results"]} == {"ring", "auto", "native"}


@pytest.mark.multiprocess
@pytest.mark.timeout(180)
def test_a_calibrated_run_times_single_calls_and_prints_the_model(tmp_path):
    """``--calibrate 1``: ping-pong first, every call timed on its own (the
    slowest rank's), and predicted against measured printed at the end."""
    out = tmp_path / "r.json"
    cmd = [sys.executable, "-m", "mycollectives.bench", "--nprocs", "2", "-b", "64K", "-e", "256K", "-f", "2",
           "-n", "3", "-w", "1", "--reps", "2", "--algorithm", "ring,recursive_doubling,native",
           "--progress", "0", "--calibrate", "1", "--json", str(out)]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=170)
    assert done.returncode == 0, done.stderr[-2000:]
    meta, results = json.loads(out.read_text()).values()
    assert set(meta["calibration"]) == {"alpha", "beta", "gamma"}
    for r in results:
        assert len(r["calls_us"]) == 3 * 2 and min(r["calls_us"]) > 0
        for rep, t in enumerate(r["times_us"]):  # a repetition's time: the slowest rank's mean call
            assert np.mean(r["calls_us"][3 * rep : 3 * rep + 3]) >= t - 0.1
    assert "# model: all_reduce, 2 ranks" in done.stdout
    assert "# median relative error:" in done.stdout
    assert [int(r[0]) for r in parse_table(done.stdout)] == [65536, 131072, 262144]  # the report is comments
    rows = [
        ln.split()[1:]
        for ln in done.stdout.splitlines()
        if ln.startswith("# ") and "%" in ln and "error" not in ln
    ]
    assert {(int(r[0]), r[1]) for r in rows} == {(n, a) for n in (65536, 131072, 262144)
                                                 for a in ("ring", "recursive_doubling")}  # fmt: skip


@pytest.mark.multiprocess
@pytest.mark.timeout(180)
def test_the_p2p_floor_script_checks_and_pairs_its_three_all_reduces(tmp_path):
    """benchmarks/p2p_floor.py: every variant is checked for the right sum
    before timing (it exits non-zero otherwise), and every repetition has a
    sample of each."""
    out = tmp_path / "floor.json"
    script = ROOT / "benchmarks" / "p2p_floor.py"
    cmd = [sys.executable, str(script), "--nprocs", "3", "--size", "12K", "--reps", "4", "--json", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=170, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    data = json.loads(out.read_text())
    assert data["machine"]["world_size"] == 3 and data["machine"]["bytes"] == 12 << 10
    assert set(data["samples"]) == {"native", "handwritten", "ours"}
    for v in data["samples"].values():
        assert len(v["wall_ms"]) == len(v["cpu_ms"]) == 4 and min(v["wall_ms"]) > 0
    assert "native / this, paired" in done.stdout


@pytest.mark.multiprocess
def test_the_p2p_floor_script_refuses_sizes_it_cannot_split():
    script = ROOT / "benchmarks" / "p2p_floor.py"
    done = subprocess.run([sys.executable, str(script), "--nprocs", "3", "--size", "1K"],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)  # fmt: skip
    assert done.returncode != 0 and "multiple of 4 * nprocs = 12 bytes" in done.stderr


def test_plots_draw_every_algorithm(tmp_path):
    pytest.importorskip("matplotlib")
    from mycollectives.bench.plot import plot_busbw
    from mycollectives.book.bench.figures import model_axes

    rows = [_result(a, 1 << k, 10.0 * k) for a in ("ring", "native") for k in (16, 18, 20)]
    fig = plot_busbw(rows, str(tmp_path / "busbw.png"), "test")
    assert (tmp_path / "busbw.png").stat().st_size > 0
    assert [ln.get_label() for ln in fig.axes[0].get_lines()] == ["ring", "native"]
    pts = compare([r for r in rows if r.algorithm == "ring"], Textbook(), [1e-5, 1e-9, 0.0])
    assert len(pts) == 3
    model_axes(fig.axes[0], pts)


def test_shared_cores_charge_a_round_its_total_work():
    """Four ranks on two cores: a ring round in which every rank moves data
    lasts the total over the cores, twice its busiest rank's share."""
    beta_only = [0.0, 0.0, 1e-9, 0.0]
    alone, shared = (
        _us(CpuModel(), "ring", 1 << 20, beta_only),
        _us(CpuModel(cores=2), "ring", 1 << 20, beta_only),
    )
    assert shared == pytest.approx(2 * alone)
    assert _us(CpuModel(cores=4), "ring", 1 << 20, beta_only) == pytest.approx(alone)  # enough cores
    # a binomial tree's last reduce round has two busy ranks of four: the cores keep up
    tree = [_us(m, "reduce_broadcast", 1 << 20, beta_only) for m in (CpuModel(), CpuModel(cores=2))]
    assert tree[1] < 2 * tree[0]


def test_gpu_calls_are_timed_by_cuda_events_with_one_sync_at_the_end(monkeypatch):
    """On CUDA each call is timed by an event recorded after it, and the host
    synchronises once, after the loop, so NCCL's calls stay asynchronous
    (a stand-in Event checks the wiring on a machine without a GPU)."""
    import types

    import torch

    from mycollectives.bench import runner

    clock = iter(range(100))

    class Event:  # what torch.cuda.Event offers the runner, on a fake millisecond clock
        def __init__(self, enable_timing=False):
            assert enable_timing
            self.ms = None

        def record(self):
            self.ms = float(next(clock))

        def elapsed_time(self, later):
            return later.ms - self.ms

    syncs, calls = [], []
    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(runner, "_sync", syncs.append)
    monkeypatch.setattr(runner, "_barrier", lambda device, group: None)
    case = types.SimpleNamespace(device=torch.device("cuda", 0), group=None, call=calls.append)
    assert runner.time_calls(case, "ring", 3) == [1e-3, 1e-3, 1e-3]
    assert calls == ["ring"] * 3 and len(syncs) == 1


def test_the_quiet_time_is_the_lower_quartile_of_single_calls():
    """The model's measured time: neither the repetitions' median nor their
    minimum, but the lower quartile of single calls, which calls delayed a
    whole scheduler tick (the four slow ones here) do not reach."""
    r = _result("ring", 1 << 20, 100.0, p=2)
    r.times_us = [100.0, 90.0, 3000.0]
    r.calls_us = [4000.0, 40.0, 4100.0, 50.0, 60.0, 4200.0, 70.0, 4300.0, 80.0]
    assert measured_us(r) == 100.0 and measured_us(r, "min") == 90.0
    assert measured_us(r, "quiet") == 60.0
    r.calls_us = []
    with pytest.raises(ValueError, match="no single-call times"):
        measured_us(r, "quiet")
    with pytest.raises(ValueError, match="stat: expected"):
        measured_us(r, "mean")


def test_on_a_cpu_a_rank_pays_for_its_sends_and_its_receives():
    """The CPU model adds messages up as it adds bytes (LogP's overhead at
    both ends): recursive doubling's exchange costs each rank two, while
    the binomial reduce and broadcast cost their busiest rank one a round."""
    cpu, book = CpuModel(), Textbook()
    rd = schedule_of(_result("recursive_doubling", 1 << 20, 1.0, p=2))
    rb = schedule_of(_result("reduce_broadcast", 1 << 20, 1.0, p=2))
    assert counts(book, rd, [1.0, 0, 0])[0] == 1 and counts(cpu, rd, [1.0, 0, 0, 0])[0] == 2
    assert counts(book, rb, [1.0, 0, 0])[0] == counts(cpu, rb, [1.0, 0, 0, 0])[0] == 2
    assert (
        counts(cpu, rd, [1.0, 0, 0, 0])[2] == 2 * counts(book, rd, [1.0, 0, 0])[1]
    )  # bytes: sent plus received


def test_the_fit_refuses_a_single_size():
    """Messages and bytes grow together within one size: one size cannot
    tell them apart, so the fit says what it needs instead of guessing."""
    pts = [_result(a, 1 << 20, 100.0, p=4) for a in ("ring", "recursive_doubling", "reduce_broadcast")]
    with pytest.raises(ValueError, match="at least two sizes"):
        fit_results(pts, Textbook(), [1e-5, 1e-9, 1e-9])


def test_a_round_costs_its_latency_once_however_many_messages_it_carries():
    """``latency`` (LogP's L): one per round that moves bytes, on top of the
    per-message alpha; the fit tells the two apart on schedules with few
    rounds of many messages (direct) and many rounds of one (ring)."""
    model = CpuModel()
    truth = np.array([10e-6, 70e-6, 1e-9, 0.5e-9])
    assert model.names == ("alpha", "latency", "beta", "gamma")
    ring = schedule_of(_result("ring", 1 << 20, 1.0, p=4))
    direct = schedule_of(_result("direct", 1 << 20, 1.0, p=4))
    assert counts(model, ring, truth)[:2].tolist() == [6 * 2, 6]  # 6 rounds: a send and a receive in each
    assert counts(model, direct, truth)[:2].tolist() == [2 * 3 * 2, 2]  # 2 rounds of 3 sends and 3 receives
    assert model.start(Machine(alpha=1e-5, beta=1e-9, gamma=1e-9))[1] == 0.0  # ping-pong: no latency
    pts = _made_by(model, truth, ("ring", "recursive_doubling", "reduce_broadcast", "direct"))
    fitted = fit_results(pts, model, model.start(Machine(1e-5, 1e-9, 1e-9)))
    assert fitted == pytest.approx(truth, rel=1e-3)
    assert median_error(compare(pts, model, fitted)) < 1e-6


def test_buffers_that_outgrow_the_cache_move_at_the_speed_of_memory():
    """``cache_bytes``: from ``world_size * size`` bytes up, a point's bytes
    are counted in the memory columns (beta_mem, gamma_mem), below it in the
    cache's; the fit recovers both pairs, and a sweep's ``llc_bytes`` asks for it."""
    model = CpuModel(cores=2, cache_bytes=32 << 20)
    truth = np.array([20e-6, 60e-6, 0.02e-9, 0.12e-9, 0.05e-9, 0.15e-9])
    assert len(model.names) == 6
    # 4 ranks' buffers of 4 MiB fit in 32 MiB, of 8 MiB they fill it
    small = schedule_of(_result("ring", 4 << 20, 1.0, p=4))
    large = schedule_of(_result("ring", 8 << 20, 1.0, p=4))
    fs, fl = counts(model, small, truth), counts(model, large, truth)
    assert fs[2] > 0 and fs[3] > 0 and fs[4] == fs[5] == 0  # in cache: beta and gamma
    assert fl[2] == fl[3] == 0  # out of cache: twice the bytes, at memory speed
    assert fl[4] == 2 * fs[2] and fl[5] == 2 * fs[3]
    assert fs[0] == fl[0] and fs[1] == fl[1] == 6  # messages and rounds do not care
    algs = ("ring", "recursive_doubling", "reduce_broadcast", "direct", "rabenseifner")
    pts = _made_by(model, truth, algs, range(16, 27))
    fitted = fit_results(pts, model, model.start(Machine(1e-5, 1e-9, 1e-9)))
    assert fitted == pytest.approx(truth, rel=1e-3)
    assert "beta_mem 0.0500 ns/B" in describe(model, fitted) and "latency 60.0 us" in describe(model, fitted)
    # the machine a sweep ran on says how large its cache is
    from mycollectives.bench.predicted import model_for

    assert model_for({"cores": 2, "llc_bytes": 32 << 20}) == model
    assert model_for({"cores": 2}) == CpuModel(cores=2)  # not recorded: one beta, one gamma
    assert model_for({"cores": 2, "llc_bytes": 1 << 40}, pts) == CpuModel(cores=2)  # no call outgrows it
    assert model_for({"cores": 16, "backend": "nccl"}) == Textbook()


def test_the_machine_description_carries_the_last_level_cache():
    from mycollectives.bench.report import last_level_cache, machine

    llc = last_level_cache()
    assert llc is None or (isinstance(llc, int) and 64 << 10 <= llc <= 4 << 30)
    assert machine("gloo", 2)["llc_bytes"] == llc


def test_predicted_reports_every_point_and_the_held_out_error(tmp_path, capsys):
    """``python -m mycollectives.bench.predicted``: on a sweep that the model
    itself made, the fit finds its parameters and every point is exact."""
    from mycollectives.bench.predicted import main

    model = CpuModel(cores=2)  # what the meta below calls for
    truth = np.array([50e-6, 30e-6, 1e-9, 0.5e-9])
    results = _made_by(model, truth, exponents=range(14, 25))
    for k in range(14, 25):  # the backend's own: not the model's to predict
        native = _result("native", 1 << k, 1.0, p=4)
        native.calls_us = [1.0] * 4
        results.append(native)
    meta = {"cores": 2, "transport": "group", "calibration": {"alpha": 1e-5, "beta": 1e-9, "gamma": 1e-9}}
    write_json(str(tmp_path / "sweep.json"), results, meta)
    main([str(tmp_path / "sweep.json")])
    out = capsys.readouterr().out
    assert "alpha 50.0 us, latency 30.0 us, beta 1.0000 ns/B, gamma 0.5000 ns/B" in out
    assert parse_table(out) == []  # every line a comment, as nccl-tests' parsers expect
    rows = [ln.split()[1:] for ln in out.splitlines() if ln.endswith("%") or ln.endswith("(fitted on)")]
    assert len(rows) == 3 * 9 and {int(r[0]) for r in rows} == {1 << k for k in range(16, 25)}
    assert all(r[4] == "0.0%" for r in rows)
    # held out: the sizes at odd positions of the sweep (2^15 ... 2^23), from 64 KiB up
    assert "median relative error: 0.0 % on the 12 points" in out
    assert "the fit saw" not in out  # 5 sizes fitted, 4 parameters
    sparse = [r for r in results if r.size in (1 << 16, 1 << 18, 1 << 20, 1 << 22)]
    write_json(str(tmp_path / "sparse.json"), sparse, meta)
    main([str(tmp_path / "sparse.json")])
    out = capsys.readouterr().out
    assert "# the fit saw 2 sizes for the model's 4 parameters" in out and "-f 2" in out
    del meta["calibration"]
    write_json(str(tmp_path / "bare.json"), results, meta)
    with pytest.raises(SystemExit, match="--calibrate 1"):
        main([str(tmp_path / "bare.json")])


@pytest.mark.multiprocess
def test_the_slurm_script_is_valid_bash_and_passes_the_bench_flags_it_accepts():
    """``benchmarks/bench_nodes.sbatch`` cannot run here (no GPU nodes): its
    shell is checked, and the bench's flags in it go through the bench's parser."""
    import re
    import shlex

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_nodes.sbatch"
    subprocess.run(["bash", "-n", str(path)], check=True)
    text = path.read_text()
    flags = text.split("-m mycollectives.bench", 1)[1].split('"', 1)[0].replace("\\\n", " ")
    values = {"$COLL": "all_reduce", "$MIN": "8", "$MAX": "1G", "$OUT": "/tmp/x", "${COLL}": "all_reduce"}
    argv = [
        re.sub(r"\$\{?[A-Z]+\}?", lambda m: values.get(m.group(0), m.group(0)), a) for a in shlex.split(flags)
    ]
    args = parser().parse_args(argv)
    assert (args.collective, args.algorithm, args.stepfactor) == ("all_reduce", "all", 2)
    assert args.json.endswith("all_reduce_mycollectives.json")


@pytest.mark.gpu
@pytest.mark.multiprocess
@pytest.mark.timeout(300)
def test_one_gpu_runs_our_algorithms_and_nccls_own(tmp_path):
    """On a CUDA machine: NCCL with a world of one, every algorithm of ours
    and NCCL's own on the device, results checked, the CUDA-event timing."""
    out = tmp_path / "gpu.json"
    cmd = [sys.executable, "-m", "mycollectives.bench", "--nprocs", "1", "--device", "cuda", "-b", "1M", "-e", "16M",
           "-f", "4", "-n", "3", "-w", "1", "--reps", "2", "--algorithm", "all", "--progress", "0", "--json", str(out)]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stderr[-2000:]
    data = json.loads(out.read_text())
    assert data["machine"]["backend"] == "nccl"
    assert all(r["wrong"] == 0 and min(r["calls_us"]) > 0 for r in data["results"])


def test_mpi_ratio_table_reads_recorded_runs(tmp_path):
    import json

    from mycollectives.bench.factors import format_size
    from mycollectives.book.bench.mpi import load_runs, ratio_table

    for p, ours in ((2, 3.0), (4, 1.0)):
        run = {
            "machine": {"world_size": p, "cpu": "test cpu", "mpi": "MPICH test", "copy_gbs": 9.5},
            "results": [
                {
                    "collective": "all_reduce",
                    "size": 1 << 16,
                    "busbw": {"mpi": 2.0, "gloo": 1.0, "ours": ours},
                    "times_s": {"mpi": [3e-5, 1e-5, 2e-5], "gloo": [1e-3] * 3, "ours": [5e-5, 4e-5, 6e-5]},
                }
            ],
        }
        (tmp_path / f"np{p}.json").write_text(json.dumps(run))
    runs = load_runs(tmp_path)
    assert [r["machine"]["world_size"] for r in runs] == [2, 4]
    table = ratio_table(runs)
    assert "all_reduce (p=2)" in table and "1.50x" in table and "0.50x" in table and "9.5 GB/s (p=2)" in table
    assert format_size(1 << 16) == "64K" and format_size(3 << 20) == "3M" and format_size(1000) == "1000"
    assert "no recorded runs" in ratio_table([])
    assert "test cpu" not in ratio_table(runs, "ours/gloo", machine=False)
    from mycollectives.book.bench.mpi import bounds, call_us

    assert call_us(runs[0], "all_reduce", 1 << 16) == pytest.approx(
        {"mpi": 20.0, "gloo": 1000.0, "ours": 50.0}
    )
    lines = bounds(runs).splitlines()
    assert (
        lines[0].startswith("all_reduce, p=2: 64K in 50 us (MPICH 20, gloo 1000)")
        and "32% of one core" in lines[1]
    )
    with pytest.raises(KeyError, match="no broadcast"):
        call_us(runs[0], "broadcast", 1 << 16)


def test_local_timing_gives_bench_results_and_a_model_can_be_judged_on_them():
    from mycollectives.bench.predicted import compare, fit_results, median_error
    from mycollectives.book.bench.local import time_local, trace_call
    from mycollectives.book.bench.tables import winners_agree

    menu = {"all_reduce": ("ring", "recursive_doubling"), "barrier": ("dissemination",)}
    results = time_local(3, menu, [256, 4096, 65536], reps=2)
    keys = {(r.collective, r.algorithm, r.size) for r in results}
    assert keys == {("all_reduce", a, n) for a in menu["all_reduce"] for n in (256, 4096, 65536)} | {
        ("barrier", "dissemination", 0)
    }
    assert all(len(r.times_us) == 2 and r.time_us > 0 and r.world_size == 3 for r in results)
    ours = [r for r in results if r.collective == "all_reduce"]
    model = Textbook()
    params = fit_results(ours, model, model.start(Machine(1e-5, 1e-9, 1e-9)), stat="min", min_bytes=0)
    points = compare(ours, model, params, stat="min", min_bytes=0)
    assert len(points) == 6 and median_error(points) >= 0
    agree, total = winners_agree(points)
    assert total == 3 and 0 <= agree <= 3
    with pytest.raises(ValueError, match="two sizes"):
        fit_results(ours, model, params, stat="min")  # nothing from 64 KiB up but one size
    events = trace_call(4, lambda t: mc.all_reduce(t, algorithm="ring"), 1 << 12)
    assert len(events) == 4 * 2 * 3 and {e.collective for e in events} == {"all_reduce"}
