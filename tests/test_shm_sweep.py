"""No shared-memory file outlives its owners past the next transport's sweep (issue 42, finding 8):
files whose owner was killed (SIGKILL, ``os._exit``, its resource tracker too) are unlinked; files a
live process maps, and files too young to judge, are kept."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from mycollectives.transport import shm_setup
from mycollectives.transport.shm_regions import map_file


def _name(tag: str) -> str:
    return os.path.join(shm_setup.SHM_DIR, f"mycollectives-test{uuid.uuid4().hex[:8]}-0-{tag}")


@pytest.fixture
def fresh(monkeypatch):
    monkeypatch.setattr(shm_setup, "_swept", False)


@pytest.mark.multiprocess
@pytest.mark.timeout(120)
def test_files_of_a_killed_owner_are_swept_and_live_or_young_ones_kept(fresh):
    dead = _name("dead")
    code = (
        "import os, signal, mmap\n"
        f"fd = os.open({dead!r}, os.O_RDWR | os.O_CREAT, 0o600); os.ftruncate(fd, 1 << 20)\n"
        "m = mmap.mmap(fd, 1 << 20); m[:4] = b'data'\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], timeout=100)
    assert out.returncode == -signal.SIGKILL and os.path.exists(dead)
    live, young = _name("live"), _name("young")
    held = map_file(live, 1 << 16)  # mapped by this (live) process
    with open(young, "wb") as f:
        f.write(b"x")
    old = time.time() - 60
    for p in (dead, live):
        os.utime(p, (old, old))
    try:
        gone = shm_setup.sweep(min_age=10.0)
        assert dead in gone and not os.path.exists(dead)
        assert os.path.exists(live) and os.path.exists(young)
        assert held.numel() == 1 << 16
        assert shm_setup.sweep(min_age=0.0) == []  # once per process
    finally:
        shm_setup.untrack(live)
        for p in (dead, live, young):
            if os.path.exists(p):
                os.unlink(p)
