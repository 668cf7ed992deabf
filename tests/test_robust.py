"""Issue 33 beside the heap (items 2, 6, 7, 8): the package's tags are out of
the user's reach; send and recv to a dead peer raise the package's errors;
new shared-memory groups honour ``async_op`` and any order of first use; a
bad ``MYCOLLECTIVES_TIMEOUT`` is refused with a line that names it."""

from __future__ import annotations

import pytest
import torch
from distpool import Pools

import mycollectives as mc
from mycollectives.transport import COLLECTIVE_TAG, current_local

pools = Pools("robust_tasks")


@pytest.fixture(scope="module", autouse=True)
def _close_pools():
    yield
    pools.close()


@pytest.mark.parametrize("kind", ["group", "shm"])
@pytest.mark.multiprocess
@pytest.mark.timeout(300)
def test_a_user_tag_in_the_package_range_is_refused_on_both_transports(kind):
    for rank, out in enumerate(pools.everywhere(2, "reserved_tag", kind, timeout=120)):
        for tag in (str(COLLECTIVE_TAG), str(COLLECTIVE_TAG + 1), "-1"):
            assert out[tag].startswith("ValueError") and "'tag'" in out[tag], out[tag]
            assert f"on rank {rank}" in out[tag] and "reserved" in out[tag], out[tag]
        assert out["1.5"].startswith("TypeError"), out
        assert out["recv"].startswith("ValueError"), out
        assert out["sum"] == [2.0] * 4 and out["largest user tag"] == [7.0, 7.0], out


def _stray_message(rank: int):
    """Rank 1 puts a message with the collectives' tag in flight (through the
    transport itself, which no public call allows), then both all-reduce."""
    from mycollectives.api.agree import _HEAD, _MSG

    t = current_local()
    if rank == 1:  # as long as a descriptor
        t.isend(torch.full((_HEAD + _MSG + 2 * 2,), 2.5, dtype=torch.float64), 0, COLLECTIVE_TAG)
    try:
        mc.all_reduce(torch.ones(4), timeout=5)
    except mc.CollectiveError as e:
        return f"{type(e).__name__}: {e}"
    return "ok"


def test_a_stray_message_is_never_read_as_an_argument_descriptor():
    out = mc.run_local(_stray_message, 2)
    assert out[0].startswith("CollectiveError") and "not an argument descriptor" in out[0], out[0]
    assert "rank 1" in out[0] and "\\x" not in out[0] and "\ufffd" not in out[0], out[0]


@pytest.mark.parametrize("kind", ["group", "shm"])
@pytest.mark.multiprocess
@pytest.mark.timeout(300)
def test_send_and_recv_to_a_dead_peer_raise_the_package_errors(kind):
    try:
        out = pools.run(2, "p2p_dead_peer", kind, timeout=120, ranks=[0])
    finally:
        pools.kill(2)
    status, messages = out[0]
    assert status == "ok", messages
    for m in messages:
        assert m.split(":")[0] in ("PeerError", "CollectiveTimeout"), messages
        assert "rank 1" in m, messages


@pytest.mark.multiprocess
@pytest.mark.timeout(300)
def test_new_shared_memory_groups_honour_async_op_in_any_order():
    for rank, out in enumerate(pools.everywhere(2, "new_groups_in_opposite_orders", 20.0, timeout=120)):
        assert out["sums"] == {1.0: 2.0, 10.0: 20.0}, out
        if rank == 0:  # rank 1 had not joined yet: its calls could not have completed
            assert out["pending"] == [True, True], out


@pytest.mark.parametrize("value", ["-5", "0", "abc", "nan"])
@pytest.mark.multiprocess
@pytest.mark.timeout(300)
def test_a_bad_timeout_variable_is_refused_naming_it(value):
    for rank, out in enumerate(pools.everywhere(2, "env_timeout", value, timeout=120)):
        assert out.startswith("ValueError") and "MYCOLLECTIVES_TIMEOUT" in out and f"rank {rank}" in out, out


@pytest.mark.parametrize("value", ["-5", "0", "abc"])
def test_a_bad_timeout_variable_is_refused_by_the_local_world(value, monkeypatch):
    monkeypatch.setenv("MYCOLLECTIVES_TIMEOUT", value)
    with pytest.raises(ValueError, match="MYCOLLECTIVES_TIMEOUT"):
        mc.run_local(lambda rank: None, 2)


@pytest.mark.multiprocess
@pytest.mark.timeout(300)
def test_dtensor_tensor_parallelism_under_the_patch_is_announced_as_not_routed():
    for out in pools.everywhere(2, "dtensor_under_the_patch", timeout=200):
        assert out["equal"], out
        assert out["not routed"] and "not routed" in out["not routed"][0], out
