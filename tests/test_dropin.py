"""A true drop-in: what real training code does, on real gloo groups, on both
transports (the process group's own send/receive, and shared memory).

User messages and collectives never cross; ``async_op=True`` gives a
pending handle that behaves like torch's ``Work`` (a DDP comm hook's
``get_future()`` included); a dead peer gives ``mc.PeerError`` or
``mc.CollectiveTimeout`` naming the collective, round and peer, before or
during the call; the shared-memory set-up honours the call's timeout, never
calls the public collectives it may have replaced, and leaves nothing in
/dev/shm however a rank ends; torch.distributed can be patched to run on the
package, and DDP with a comm hook, a tensor-parallel MLP and FSDP2 compute
what they compute natively.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from distpool import Pools

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(300)]
KINDS = ["group", "shm"]
pools = Pools("dropin_tasks")


@pytest.fixture(scope="module", autouse=True)
def _close_pools():
    yield
    pools.close()


def everywhere(p: int, name: str, *args, timeout: float = 120) -> list:
    return pools.everywhere(p, name, *args, timeout=timeout)


def fresh(p: int, name: str, *args, timeout: float = 120, ranks=None) -> list:
    """Run on a pool used once and then killed (tasks that leave a group broken)."""
    try:
        return pools.run(p, name, *args, timeout=timeout, ranks=ranks)
    finally:
        pools.kill(p)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("check", [True, False])
def test_a_pending_user_message_and_a_collective_never_cross(kind, check):
    for out in everywhere(2, "p2p_crosses_collective", kind, check):
        assert out == {"all_reduce": True, "recv": True}, out


@pytest.mark.parametrize("kind", KINDS)
def test_async_collectives_return_pending_handles_like_torch_work(kind):
    outs = everywhere(3, "async_handles", kind)
    for out in outs:
        assert all(out["results"]) and out["blocking"], out
        assert out["future_value_is_the_tensor"] and out["completed"] and out["wait_returns"], out
    assert any(out["any_pending_at_once"] for out in outs), "every async call had completed before returning"


@pytest.mark.parametrize("kind", KINDS)
def test_an_async_collectives_error_comes_out_of_wait(kind):
    out = fresh(2, "async_error_in_work", kind, timeout=60)
    assert out[1] == ("ok", "skipped")
    status, message = out[0]
    assert status == "ok" and message.startswith("CollectiveTimeout"), message
    assert "round" in message and "rank 1" in message and message.endswith("exception() set: True"), message


@pytest.mark.parametrize("kind", KINDS)
def test_a_peer_dead_before_the_call_gives_a_package_error(kind):
    out = fresh(3, "dead_before_the_call", kind, 2, timeout=90, ranks=[0, 1])
    for rank in (0, 1):
        status, message = out[rank]
        assert status == "ok" and message.startswith(("PeerError", "CollectiveTimeout")), message
        assert "all_reduce (ring)" in message and "round" in message, message
    assert any("rank 2" in out[r][1] for r in (0, 1)), out


def test_a_peer_killed_mid_call_on_shared_memory_gives_peer_error_and_leaves_nothing():
    out = fresh(3, "killed_mid_call_shm", 1, timeout=120, ranks=[0, 2])
    for rank in (0, 2):
        status, res = out[rank]
        assert status == "ok", res
        assert res["message"].startswith(("PeerError", "CollectiveTimeout")), res["message"]
        assert "round" in res["message"], res["message"]
    assert any("rank 1" in out[r][1]["message"] for r in (0, 2)), out
    assert out[0][1]["left"] == [] and out[2][1]["left"] == [], out
    # the dead rank's files: unlinked by a survivor that saw it die, or by its
    # resource tracker (a process of its own, which may take a moment)
    key = out[0][1]["key"]
    deadline = time.monotonic() + 30
    while (left := _job_files(key)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert left == [], left


def _job_files(key: int) -> list[str]:
    return [f for f in os.listdir("/dev/shm") if f.startswith(f"mycollectives-{key:x}-")]


def test_the_shared_memory_set_up_honours_the_calls_timeout():
    out = fresh(3, "shm_setup_with_a_late_rank", 2, 3.0, timeout=60, ranks=[0, 1])
    for rank in (0, 1):
        status, message = out[rank]
        assert status == "ok" and message.startswith("CollectiveTimeout after"), message
        assert float(message.split()[2]) < 10, message  # the call's 3 s, not torch's 30 minutes
        assert "set-up" in message and "rank 2" in message, message


def test_the_shared_memory_set_up_never_calls_a_patched_torch_distributed():
    assert everywhere(3, "shm_setup_under_a_patched_torch") == ["3.0"] * 3


def test_a_rank_outside_the_group_does_nothing_as_in_torch():
    out = everywhere(3, "not_in_group")
    assert out[0]["value"] == out[1]["value"] == [1.0] * 4
    assert out[2] == {"returned": "None", "value": [2.0] * 4, "untouched": True, "warned": True}


@pytest.mark.parametrize("kind", KINDS)
def test_all_to_all_single_with_output_aliasing_input(kind):
    assert everywhere(3, "alias_all_to_all", kind) == [True] * 3


@pytest.mark.parametrize("kind", KINDS)
def test_meta_tensors_are_refused_on_every_rank(kind):
    for rank, message in enumerate(everywhere(2, "meta_refused", kind)):
        assert message.startswith("ValueError") and "meta tensor" in message, message
        assert f"on rank {rank}" in message, message


@pytest.mark.timeout(400)
@pytest.mark.parametrize("kind", KINDS)
def test_ddp_tensor_parallel_and_fsdp2_under_the_patch_match_native(kind):
    for diffs in everywhere(2, "patched_trainers", kind, timeout=300):
        assert diffs["ddp"] < 1e-6 and diffs["tp"] < 1e-5 and diffs["fsdp2"] < 1e-6, diffs


_SIGTERM = """
import sys, time, torch, torch.distributed as dist
from mycollectives.transport import COLLECTIVE_TAG
from mycollectives.transport.shm import ShmTransport
rank, world, store = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=world)
t = ShmTransport(None, timeout=30)
if rank == 0:  # a message its receiver never reads: the region stays in /dev/shm, as after a failed call
    t.isend(torch.ones(1 << 22), 1, COLLECTIVE_TAG)
print(f"{t.key:x}", flush=True)
time.sleep(600)
"""


def test_ranks_ended_by_sigterm_leave_nothing_in_dev_shm():
    """What torchrun does to every rank when one fails: SIGTERM, with a message
    sent through shared memory that its receiver never read."""
    with tempfile.TemporaryDirectory() as d:
        store = str(Path(d) / "store")
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", _SIGTERM, str(r), "3", store], stdout=subprocess.PIPE, text=True
            )
            for r in range(3)
        ]
        try:
            keys = {proc.stdout.readline().strip() for proc in procs}
            assert len(keys) == 1 and all(keys), keys
            key = keys.pop()
            before = [f for f in os.listdir("/dev/shm") if f.startswith(f"mycollectives-{key}-")]
            assert before, "the unread message should have left its region in /dev/shm"
            for proc in procs:
                proc.send_signal(signal.SIGTERM)
            codes = [proc.wait(timeout=60) for proc in procs]
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
    assert all(c == -signal.SIGTERM for c in codes), codes  # ended as SIGTERM ends a process
    left = [f for f in os.listdir("/dev/shm") if f.startswith(f"mycollectives-{key}-")]
    assert left == [], left
