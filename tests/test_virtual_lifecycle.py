"""A virtual run owns what it makes and ends every thread it starts (issue 42, findings 1 and 2).

The leak case loops 100 runs in a fresh process and counts live transports,
threads and resident memory; the thread cases stop runs by their wall-clock
timeout and by Ctrl-C, in a fresh process each, and check that only the rank
in control is named, that no thread is left, and that the interpreter exits
normally (no "terminate called without an active exception", status 134).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
import torch

import mycollectives as mc
from mycollectives import virtual
from mycollectives.virtual.runner import WALL_ENV

ROOT = Path(__file__).resolve().parents[1]


def _python(code: str, timeout: float, env: dict | None = None, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    cmd = [sys.executable, "-c", textwrap.dedent(code)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, **kw)


LEAK = """
    import gc, json, threading
    import torch, mycollectives as mc
    from mycollectives import virtual
    from mycollectives.virtual.transport import VirtualTransport

    def rss_mib():
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) / 1024

    def step(rank):
        x = torch.full((1 << 16,), float(rank))
        mc.all_reduce(x)
        mc.all_reduce(x, async_op=True).wait()  # a stream: an actor and a lane of its own
        return float(x[0])

    threads0 = threading.active_count()
    virtual.run(step, world_size=8, timeout=600)  # the first run's imports and caches
    gc.collect()
    rss0 = rss_mib()
    for _ in range(100):
        right = virtual.run(step, world_size=8, timeout=600).results == [8 * 28.0] * 8  # 0+...+7, then eight times that
        assert right
    gc.collect()
    live = sum(isinstance(o, VirtualTransport) for o in gc.get_objects())
    print(json.dumps({"live": live, "threads": [threads0, threading.active_count()], "rss": [rss0, rss_mib()]}))
"""


@pytest.mark.multiprocess
@pytest.mark.timeout(1500)
def test_100_runs_leave_no_transport_no_thread_and_no_memory():
    out = _python(LEAK, timeout=1400)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["live"] == 0, got
    assert got["threads"][1] == got["threads"][0], got
    assert got["rss"][1] - got["rss"][0] < 50, got  # MiB over 100 runs


def _spin(rank):
    mc.all_reduce(torch.ones(4))
    if rank == 5:
        while True:
            pass
    mc.all_reduce(torch.ones(4))


@pytest.mark.timeout(300)
def test_a_timeout_names_the_rank_in_control_and_leaves_no_thread():
    virtual.run(lambda r: mc.all_reduce(torch.ones(4)), timeout=200)  # imports out of the timed run
    before = threading.active_count()
    with pytest.raises(TimeoutError) as e:
        virtual.run(_spin, timeout=5)
    assert "in control: rank 5;" in str(e.value)
    assert "rank 4" not in str(e.value)
    assert threading.active_count() == before


def _sleeper(rank):
    import time

    if rank == 2:
        time.sleep(8)  # past the timeout, in C code: stopped when the sleep returns
    mc.all_reduce(torch.ones(4))


@pytest.mark.timeout(300)
def test_a_rank_sleeping_past_the_timeout_is_stopped_when_it_wakes():
    virtual.run(lambda r: mc.all_reduce(torch.ones(4)), timeout=200)
    before = threading.active_count()
    with pytest.raises(TimeoutError, match="in control: rank 2;"):
        virtual.run(_sleeper, timeout=3)
    assert threading.active_count() == before


ABORT = """
    import torch, mycollectives as mc
    from mycollectives import virtual
    virtual.run(lambda r: mc.all_reduce(torch.ones(4)), timeout=200)
    def spin(rank):
        mc.all_reduce(torch.ones(4))
        if rank == 3:
            print("spinning", flush=True)
            while True:
                pass
    try:
        virtual.run(spin, timeout=TIMEOUT)
    except BaseException as e:
        import threading
        print(type(e).__name__, "|", (str(e).splitlines() or [""])[0], "|", getattr(e, "__notes__", []), flush=True)
        print("threads", threading.active_count(), flush=True)
"""


@pytest.mark.multiprocess
@pytest.mark.timeout(300)
def test_the_interpreter_exits_normally_after_a_timeout():
    out = _python(ABORT.replace("TIMEOUT", "4"), timeout=280)
    assert out.returncode == 0, (out.returncode, out.stderr[-2000:])
    assert "terminate called" not in out.stderr
    assert "TimeoutError" in out.stdout and "in control: rank 3;" in out.stdout
    assert "threads 1" in out.stdout


@pytest.mark.multiprocess
@pytest.mark.timeout(300)
def test_ctrl_c_stops_the_run_names_the_rank_and_leaves_no_thread():
    code = textwrap.dedent(ABORT.replace("TIMEOUT", "250"))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    try:
        assert proc.stdout.readline().strip() == "spinning"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=200)
    finally:
        proc.kill()
    assert proc.returncode == 0, (proc.returncode, err[-2000:])
    assert "terminate called" not in err
    assert out.startswith("KeyboardInterrupt") and "in control: rank 3)" in out, out
    assert "threads 1" in out


@pytest.mark.parametrize("value", ["0", "-5", "abc", "nan", "inf"])
def test_a_bad_timeout_variable_is_refused_naming_it(monkeypatch, value):
    monkeypatch.setenv(WALL_ENV, value)
    with pytest.raises(ValueError, match=f"{WALL_ENV}='{value}': expected a finite number > 0"):
        virtual.run(lambda r: None, world_size=2)


@pytest.mark.parametrize("timeout", [True, 0, -1, float("nan"), float("inf"), "10"])
def test_a_bad_timeout_argument_is_refused(timeout):
    with pytest.raises((TypeError, ValueError), match="argument 'timeout' must be a finite number > 0"):
        virtual.run(lambda r: None, world_size=2, timeout=timeout)


def test_a_run_past_the_systems_thread_limit_is_refused_before_any_thread_starts(monkeypatch):
    from mycollectives.virtual import threads

    monkeypatch.setattr(threads, "thread_limit", lambda: 1000)
    before = threading.active_count()
    with pytest.raises(ValueError, match="40000 ranks need 40000 threads, .* at most 1000 more"):
        virtual.run(lambda r: None, nodes=5000)
    assert threading.active_count() == before


@pytest.mark.timeout(300)
def test_a_thread_that_will_not_start_stops_those_that_did(monkeypatch):
    """What ``nodes=5000`` meets where the system's limit is not known in advance (memory for stacks)."""
    started, start = [0], threading.Thread.start

    def limited(self):
        if self.name.startswith("rank") and started[0] >= 300:
            raise RuntimeError("can't start new thread")
        started[0] += self.name.startswith("rank")
        start(self)

    monkeypatch.setattr(threading.Thread, "start", limited)
    before = threading.active_count()
    with pytest.raises(RuntimeError, match="cannot start the thread of rank 300 .* run fewer ranks"):
        virtual.run(lambda r: None, nodes=64, timeout=250)
    assert threading.active_count() == before
