"""Issue 42, finding 8: SIGTERM to a rank blocked in a set-up exchange (a symmetric-memory
rendezvous, or a shared-memory transport's start) takes effect at once, not when the exchange's
timeout ends: the rank unlinks its files in ``/dev/shm``, says what it was waiting in, and ends as
SIGTERM ends a process; its peer is told that rank 0 has ended, long before its own timeout."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

RANK = Path(__file__).with_name("hostile_term_rank.py")
LATE_S = 5.0  # rank 0 must end this soon after SIGTERM (rank 1 joins 8 s after rank 0 waits)

CASES = [
    ("rendezvous", False, "symmetric memory rendezvous"),
    ("rendezvous", True, "symmetric memory rendezvous"),  # under torchrun: the flight recorder dumps too
    ("start", False, "agreeing on names"),
]


def _start(tmp_path: Path, case: str, torchrun: bool) -> list[subprocess.Popen]:
    env = dict(os.environ)
    if torchrun:
        env.update(TORCHELASTIC_RUN_ID="hostile-term", MYCOLLECTIVES_FLIGHT_DIR=str(tmp_path / "flight"))
    store = tmp_path / "store"
    return [
        subprocess.Popen(
            [sys.executable, str(RANK), str(r), "2", str(store), case],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**env, "RANK": str(r), "WORLD_SIZE": "2"} if torchrun else env,
        )
        for r in range(2)
    ]


@pytest.mark.multiprocess
@pytest.mark.timeout(240)
@pytest.mark.parametrize(("case", "torchrun", "step"), CASES)
def test_sigterm_in_a_set_up_exchange_ends_the_rank_at_once_and_leaves_nothing(
    tmp_path, case, torchrun, step
):
    procs = _start(tmp_path, case, torchrun)
    try:
        ready = procs[0].stdout.readline().split()
        assert ready[:1] == ["ready"], (ready, procs[0].stderr.read() if procs[0].poll() is not None else "")
        files = ready[1:]
        assert files and all(os.path.exists(f) for f in files), files  # a message rank 1 has not read
        assert procs[0].stdout.readline().strip() == "waiting"
        time.sleep(0.5)  # into the exchange
        sent = time.monotonic()
        procs[0].send_signal(signal.SIGTERM)
        procs[0].wait(60)
        late = time.monotonic() - sent
        err0 = procs[0].stderr.read()
        assert procs[0].returncode == -signal.SIGTERM, (procs[0].returncode, err0)
        assert late < LATE_S, (late, err0)
        assert f"SIGTERM during a set-up exchange (rank 0: {step}, with ranks [1])" in err0, err0
        assert not [f for f in files if os.path.exists(f)], files
        out1, err1 = procs[1].communicate(timeout=120)
        told = time.monotonic() - sent
        assert procs[1].returncode == 3, (procs[1].returncode, out1, err1)
        assert "PeerError" in out1 and "rank 0 has failed or ended" in out1 and "rank 1" in out1, out1
        assert told < 40, told  # the peer is told, not left to its 60 s timeout
        if torchrun:  # the flight recorder's dump, written after the clean-up
            dump = json.loads((tmp_path / "flight" / "rank0.json").read_text())
            assert dump["rank"] == 0 and dump["reason"] == "SIGTERM", dump
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
