"""Issue 33 on the heap (items 1, 3, 8, 9): every property a load/store
schedule depends on is agreed before any load, or (tensors at different
offsets of the block, issue 42) made known to every rank; sizes are checked as
``torch.empty`` checks them; failures are the package's errors; nothing is
left behind, in the process or in ``/dev/shm``, however a rank ends."""

from __future__ import annotations

import os

import pytest
from distpool import Pools

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(300)]
pools = Pools("robust_heap_tasks")


@pytest.fixture(scope="module", autouse=True)
def _close_pools():
    yield
    pools.close()


@pytest.mark.parametrize("kind", ["group", "shm"])
@pytest.mark.pool(2)
def test_tensors_at_different_offsets_give_torchs_result_and_other_blocks_are_refused(kind):
    n = 8
    for rank, out in enumerate(pools.everywhere(2, "offsets", kind, timeout=150)):
        for check in (True, False):
            for call in ("all_reduce", "broadcast", "all_gather"):
                assert out[f"{call} {check}"] == "ok", (call, check, out[f"{call} {check}"])
            assert out[f"all_reduce {check} got"] == [3.0] * n, out  # 1 + 2, never a read of -99
            assert out[f"broadcast {check} got"] == [float(i) for i in range(n)], out  # rank 0's
            assert out[f"all_gather {check} got"] == [1.0] * (n // 2) + [2.0] * (n // 2), out
        assert "allocation" in out["another block"] and out["another block"].startswith("ValueError"), out
        assert f"on rank {rank}" in out["another block"], out
        assert "use of symmetric memory" in out["heap and plain"], out  # a ValueError, not a timeout
        assert out["heap and plain"].startswith("ValueError"), out
        assert out["same offset"] == "ok" and out["sum"] == 2.0, out


@pytest.mark.pool(2)
def test_rendezvous_validates_its_timeout_and_a_tensor_outside_the_heap_on_every_rank():
    for rank, out in enumerate(pools.everywhere(2, "rendezvous_errors", timeout=150)):
        assert out["timeout=-1"].startswith("ValueError") and "timeout" in out["timeout=-1"], out
        assert out["timeout='5'"].startswith("TypeError"), out
        assert out["timeout=nan"].startswith("ValueError"), out
        assert out["timeout=0"].startswith("ValueError"), out
        plain = out["plain on one rank"]
        assert plain.startswith("ValueError") and "ranks [1]" in plain and f"rank {rank}" in plain, out


@pytest.mark.pool(2)
def test_sizes_torch_empty_refuses_are_refused_and_leave_nothing():
    for out in pools.everywhere(2, "sizes", timeout=150):
        for args in ("(-1,)", "((-1, 4),)", "(2, -3)", "(-5,)"):
            assert out[args].startswith("ValueError") and "negative dimension" in out[args], out[args]
        assert out["(1.5,)"].startswith("TypeError"), out
        assert out["get_buffer(-1)"].startswith("ValueError"), out
        assert out["storage_offset=-4"].startswith("ValueError"), out
        before, after = out["left"]
        assert before == after, out["left"]


@pytest.mark.pool(2)
def test_freed_heaps_return_their_descriptors_and_mappings():
    for out in pools.everywhere(2, "rounds", 300, timeout=250):
        assert out["fds"][0] == out["fds"][1], out
        assert out["maps"][0] == out["maps"][1], out
        assert out["blocks"] == 1, out  # the group's control block only


@pytest.mark.pool(2)
def test_an_absent_peer_in_rendezvous_is_a_collective_timeout():
    try:
        out = pools.run(2, "absent_peer", timeout=120)
    finally:
        pools.kill(2)  # rank 0's row is still in flight: the group is left broken
    status, message = out[0]
    assert status == "ok" and message.startswith("CollectiveTimeout") and "rank 1" in message, message


def _ours() -> set[str]:
    """What a heap could leave in /dev/shm (semaphores are multiprocessing's, not ours)."""
    return {
        f for f in os.listdir("/dev/shm") if not f.startswith("sem.") and not f.startswith("mycollectives-")
    }


@pytest.mark.pool(3)
def test_a_rank_killed_in_rendezvous_leaves_nothing_in_dev_shm():
    before = _ours()
    try:
        out = pools.run(3, "killed_in_rendezvous", 2, timeout=120, ranks=[0, 1])
    finally:
        pools.kill(3)
    for rank in (0, 1):
        status, message = out[rank]
        assert status == "ok" and message.startswith(("PeerError", "CollectiveTimeout")), message
    assert _ours() <= before, _ours() - before


@pytest.mark.pool(2)
def test_every_rank_leaving_by_os_exit_leaves_nothing_in_dev_shm():
    before = _ours()
    try:  # wait for the processes to end, not for results they never send
        codes = pools(2).exit_codes(pools.module, "exit_now", timeout=60)
    finally:
        pools.kill(2)
    assert codes == [0, 0], f"exit codes {codes} (None: still running: the task raised or hung)"
    assert _ours() <= before, _ours() - before
