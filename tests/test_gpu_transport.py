"""The NCCL transport's wait (``transport/torch_dist.py``): no sleep-polling, and a
timeout that names the peer.

The waiting logic runs on CPU with stand-in events (query and a blocking
synchronize); the tests marked ``gpu`` run it on real CUDA events and on an
NCCL world of one (skipped, with that reason, without CUDA).
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import torch

from mycollectives.transport import torch_dist as td


class FakeEvent:
    """A CUDA event's two calls: ``query()`` true after ``ready_after`` looks
    (never, if None), ``synchronize()`` returning once ``release`` is set."""

    def __init__(self, ready_after: int | None = None):
        self.looks, self.ready_after, self.release = 0, ready_after, threading.Event()

    def query(self) -> bool:
        self.looks += 1
        return self.ready_after is not None and self.looks > self.ready_after

    def synchronize(self) -> None:
        self.release.wait()


def test_a_quick_event_is_caught_by_the_spin_without_a_thread():
    waiter = td._Waiter()
    assert td.completes(FakeEvent(ready_after=3), 5.0, waiter, spin=60.0)
    assert waiter._jobs is None  # the helper thread never started


def test_a_slow_event_is_slept_on_until_it_completes():
    waiter, event = td._Waiter(), FakeEvent()
    threading.Timer(0.05, event.release.set).start()
    assert td.completes(event, 60.0, waiter, spin=0.0)


def test_an_event_that_never_completes_times_out_and_the_next_wait_gets_a_fresh_thread():
    waiter, stuck = td._Waiter(), FakeEvent()
    assert not td.completes(stuck, 0.2, waiter, spin=0.0)
    assert waiter._jobs is None  # the stuck thread is left behind
    fine = FakeEvent()
    fine.release.set()
    assert td.completes(fine, 60.0, waiter, spin=0.0)
    stuck.release.set()


def test_the_nccl_wait_never_sleeps_a_fixed_interval():
    source = Path(td.__file__).read_text()
    assert "time.sleep" not in source and "sleep(" not in source


@pytest.mark.gpu
@pytest.mark.timeout(120)
def test_cuda_event_wait_completes_and_times_out():
    """A real CUDA event: done after a short kernel; not done while the GPU spins for seconds."""
    waiter = td._Waiter()
    torch.cuda._sleep(1_000_000)  # about a millisecond of GPU cycles
    quick = torch.cuda.Event(blocking=True)
    quick.record()
    assert td.completes(quick, 30.0, waiter)
    torch.cuda._sleep(20_000_000_000)  # many seconds
    slow = torch.cuda.Event(blocking=True)
    slow.record()
    assert not td.completes(slow, 0.2, waiter)
    torch.cuda.synchronize()


@pytest.mark.gpu
@pytest.mark.timeout(120)
def test_nccl_work_is_waited_for_and_a_stalled_round_names_its_peer():
    import torch.distributed as dist

    from mycollectives.transport.base import TransportTimeout

    torch.cuda.set_device(0)
    dist.init_process_group(
        "nccl", store=dist.HashStore(), rank=0, world_size=1, device_id=torch.device("cuda", 0)
    )
    try:
        transport = td.TorchDistTransport(timeout=30)
        t = torch.ones(1000, device="cuda")
        assert td._DistWork(dist.all_reduce(t, async_op=True), transport, 0).wait()
        assert t.sum().item() == 1000
        torch.cuda._sleep(20_000_000_000)  # the stream is busy for seconds: the round cannot finish
        work = td._DistWork(dist.all_reduce(t, async_op=True), transport, 0, peers=[0])
        with pytest.raises(TransportTimeout, match=r"waiting on ranks \[0\]") as e:
            work.wait(timeout=0.2)
        assert e.value.peer == 0
        torch.cuda.synchronize()
    finally:
        dist.destroy_process_group()
