"""Symmetric memory: tensors every rank of a host maps, and collectives run as
loads and stores on them (``mycollectives.symmetric``, ``mycollectives.loadstore``),
against torch.distributed's own on real gloo groups."""

from __future__ import annotations

import pytest
from distpool import Pools

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(300)]
pools = Pools("symmetric_tasks")


@pytest.fixture(scope="module", autouse=True)
def _close_pools():
    yield
    pools.close()


def everywhere(p: int, name: str, *args, timeout: float = 200) -> list:
    return pools.everywhere(p, name, *args, timeout=timeout)


@pytest.mark.parametrize(
    "p,kind",
    [pytest.param(p, k, marks=pytest.mark.pool(p)) for p, k in [(2, "shm"), (3, "group"), (4, "shm")]],
)
def test_every_algorithm_runs_on_symmetric_memory_and_matches_torch(p, kind):
    for problems in everywhere(p, "every_algorithm", kind):
        assert problems == [], problems


@pytest.mark.pool(2)
def test_a_call_on_symmetric_memory_sends_no_message_for_its_rounds():
    for out in everywhere(2, "ran_as_loads"):
        assert out["heap_messages"] == 0 and out["plain_messages"] > 0, out


@pytest.mark.pool(2)
def test_a_rank_on_another_host_is_refused():
    for message in everywhere(2, "another_host"):
        assert "another host" in message, message


@pytest.mark.pool(3)
def test_the_handle_offers_buffers_signals_and_barriers_and_leaves_nothing_in_dev_shm():
    out = everywhere(3, "signals")
    for rank, o in enumerate(out):
        assert o["seen"] == [0.0, 1.0, 2.0], o
        assert o["from_prev"] == 100 + (rank - 1) % 3, o
        assert o["left"] == [], o


@pytest.mark.pool(3)
def test_every_algorithm_gives_every_rank_the_same_bits():
    out = everywhere(3, "identical_across_ranks")
    for alg in out[0]:
        assert out[0][alg] == out[1][alg] == out[2][alg], alg


# Each test below leaves its group broken and kills its pool: it runs last of its pool's tests.


@pytest.mark.pool(2)
def test_a_tensor_outside_the_heap_or_ranks_that_disagree_are_refused_clearly():
    try:  # the mixed call times out: the group is left broken, so the pool goes after
        out = everywhere(2, "refusals", timeout=120)
    finally:
        pools.kill(2)
    for rank, messages in enumerate(out):
        assert "not in symmetric memory" in messages[0] and f"rank {rank}" in messages[0], messages
        assert len(messages) == 2, messages  # the mixed call raised too, not hung
    assert any("symmetric memory" in m[1] for m in out), out


@pytest.mark.pool(3)
def test_a_peer_dying_during_loads_gives_peer_error():
    try:
        out = pools.run(3, "killed_during_loads", 2, timeout=120, ranks=[0, 1])
    finally:
        pools.kill(3)
    for rank in (0, 1):
        status, message = out[rank]
        assert status == "ok" and message.startswith(("PeerError", "CollectiveTimeout")), message
        assert "rank 2" in message, message
