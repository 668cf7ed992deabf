"""Tasks the multi-process tests run on every rank of a gloo group (see distpool.py)."""

from __future__ import annotations

import dataclasses
import os
import time

import torch
import torch.distributed as dist
from cases import Case, call, compare

import mycollectives as mc
from mycollectives.transport import COLLECTIVE_TAG as TAG  # the tag that goes through shared memory


def reference(case: Case, rank: int):
    """torch.distributed's own answer. Where gloo lacks a dtype for an op, the
    same (exact, small-integer) inputs are reduced in float64 and cast back."""
    try:
        return call(case, rank, "torch")
    except (RuntimeError, ValueError) as e:
        if "support" not in str(e).lower() and "invalid" not in str(e).lower():
            raise
    wide = dataclasses.replace(case, dtype="float64")
    return [torch.from_numpy(x).to(case.torch_dtype).double().numpy() for x in call(wide, rank, "torch")]


def compare_cases(rank: int, cases: list[Case]) -> tuple[list[str], int]:
    """Run each case through mycollectives and torch.distributed; report differences."""
    os.environ["MYCOLLECTIVES_TIMEOUT"] = "30"
    problems = []
    for case in cases:
        got = call(case, rank, "mc")
        want = reference(case, rank)
        problem = compare(case, rank, got, want)
        if problem:
            problems.append(problem)
    return problems, len(cases)


def reduce_keeps_non_root_tensors(rank: int) -> bool:
    t = torch.arange(6.0) + rank
    keep = t.clone()
    mc.reduce(t, dst=0, algorithm="binomial")
    return rank == 0 or torch.equal(t, keep)


def skip_collective(rank: int, algorithm: str, skipper: int, timeout: float) -> str:
    """Every rank but ``skipper`` calls all_reduce; returns what each saw."""
    if rank == skipper:
        time.sleep(timeout + 3)  # alive, but never joins
        return "skipped"
    try:
        mc.all_reduce(torch.ones(1000), algorithm=algorithm, timeout=timeout, check=False)
    except mc.CollectiveError as e:
        return f"{type(e).__name__}: {e}"
    return "completed"


def die_mid_collective(rank: int, victim: int) -> str:
    """``victim`` exits abruptly while a large ring all-reduce is running."""
    import threading

    if rank == victim:
        threading.Timer(0.3, lambda: os._exit(1)).start()
    t = torch.ones(1 << 22)
    try:
        for _ in range(200):
            mc.all_reduce(t, algorithm="ring", timeout=10, check=False)
    except mc.CollectiveError as e:
        return f"{type(e).__name__}: {e}"
    return "completed"


def bad_input_on_one_rank(rank: int, culprit: int) -> tuple[str, bool]:
    """``culprit`` passes a wrong-sized tensor; every rank must raise, tensors untouched."""
    t = torch.arange(8.0 if rank != culprit else 9.0)
    keep = t.clone()
    start = time.monotonic()
    try:
        mc.all_reduce(t, algorithm="ring", timeout=60)
    except (ValueError, TypeError) as e:
        return f"{type(e).__name__}: {e}", torch.equal(t, keep) and time.monotonic() - start < 30
    return "no error", False


def subgroup_all_reduce(rank: int) -> list[float]:
    """A torch subgroup of the odd ranks; ranks are the group's, roots global."""
    odd = dist.new_group([r for r in range(dist.get_world_size()) if r % 2])
    t = torch.tensor([float(rank)])
    if rank % 2:
        mc.all_reduce(t, group=odd, algorithm="ring")
        mc.broadcast(t, src=1, group=odd)  # global rank 1 is the group's rank 0
    return t.tolist()


def batched_path(rank: int, cases: list[Case]) -> tuple[list[str], int]:
    """The NCCL code path (a round posted through batch_isend_irecv, polled
    waits) run on gloo, checked against torch.distributed."""
    from mycollectives.transport.torch_dist import TorchDistTransport

    return compare_on(TorchDistTransport(None, timeout=30, batched=True), rank, cases)


def compare_on(transport, rank: int, cases: list[Case]) -> tuple[list[str], int]:
    """Each case through mycollectives on ``transport`` against torch.distributed."""
    problems = []
    for case in cases:
        problem = compare(case, rank, call(case, rank, "mc", group=transport), reference(case, rank))
        if problem:
            problems.append(problem)
    return problems, len(cases)


def shm_path(rank: int, cases: list[Case], eager: int) -> tuple[list[str], int]:
    """The shared-memory transport, every message of ``eager`` bytes or more
    through /dev/shm, checked against torch.distributed."""
    from mycollectives.transport.shm import ShmTransport

    return compare_on(ShmTransport(None, timeout=30, eager_bytes=eager), rank, cases)


def shm_regions(rank: int) -> dict:
    """Point-to-point through shared memory between ranks 0 and 1: many
    messages in flight, of growing sizes and dtypes, waited out of order; then
    what is left in /dev/shm."""
    import gc

    from mycollectives.transport.shm import ShmTransport
    from mycollectives.transport.shm_regions import SHM_DIR

    t = ShmTransport(None, timeout=30, eager_bytes=64)
    shapes = [(n, dt) for n in (16, 1000, 1 << 16, 3 << 20, 5) for dt in (torch.float32, torch.int64)] * 2
    out: dict = {"ok": True}
    if rank == 0:
        works = [t.isend((torch.arange(n) * (i + 1)).to(dt), 1, TAG) for i, (n, dt) in enumerate(shapes)]
        for w in reversed(works):
            w.wait()
    elif rank == 1:
        got = [torch.empty(n, dtype=dt) for n, dt in shapes]
        works = [t.irecv(g, 0, TAG) for g in got]
        order = list(range(len(works)))
        order = order[1::2] + order[::2]  # later messages read before earlier ones
        for i in order:
            works[i].wait()
        out["ok"] = all(
            torch.equal(g, (torch.arange(g.numel()) * (i + 1)).to(g.dtype)) for i, g in enumerate(got)
        )
    dist.barrier()
    mine = f"mycollectives-{t.key:x}-{rank}-"
    if rank == 0:  # one more message: the sender sees what the receiver has read
        t.isend(torch.ones(100), 1, TAG).wait()
    elif rank == 1:
        t.irecv(torch.empty(100), 0, TAG).wait()
    out["regions"] = len(t._out[1].regions) if rank == 0 else 0
    out["left_while_alive"] = sorted(f for f in os.listdir(SHM_DIR) if f.startswith(mine))
    dist.barrier()
    del t
    gc.collect()
    out["left_after"] = sorted(f for f in os.listdir(SHM_DIR) if f.startswith(mine))
    return out


def shm_refuses_another_host(rank: int) -> str:
    """Rank 1 pretends to be on another host; its peers must refuse it."""
    from mycollectives.transport.shm import ShmTransport

    # the peers that wait on a refused rank time out: 8 s, with a set-up given
    # longer, so that a loaded machine delays neither into a timeout of its own
    t = ShmTransport(None, timeout=8, eager_bytes=1, setup_timeout=60)
    if rank == 1:
        t.host ^= 1
    try:
        mc.all_reduce(torch.ones(64), group=t, algorithm="ring", check=False)
    except mc.CollectiveError as e:
        return f"{type(e).__name__}: {e}"
    finally:
        t.close()  # the pool is killed next: leave nothing in /dev/shm
    return "completed"


def shm_skip_collective(rank: int, skipper: int, timeout: float) -> str:
    """``skip_collective`` on the shared-memory transport."""
    from mycollectives.transport.shm import ShmTransport

    t = ShmTransport(None, eager_bytes=1)
    if rank == skipper:
        time.sleep(timeout + 3)
        return "skipped"
    try:
        mc.all_reduce(torch.ones(1000), group=t, algorithm="ring", timeout=timeout, check=False)
    except mc.CollectiveError as e:
        return f"{type(e).__name__}: {e}"
    finally:
        t.close()
    return "completed"


def transport_env(rank: int) -> list[str]:
    """``MYCOLLECTIVES_TRANSPORT`` on a new subgroup: a bad value is refused,
    ``shm`` gives the shared-memory transport, which then runs a collective."""
    from mycollectives.transport import TRANSPORT_ENV, transport_for

    seen = []
    group = dist.new_group(list(range(dist.get_world_size())))
    try:
        os.environ[TRANSPORT_ENV] = "pigeon"
        try:
            transport_for(group)
        except ValueError as e:
            seen.append(str(e))
        os.environ[TRANSPORT_ENV] = "shm"
        seen.append(type(transport_for(group)).__name__)
        t = torch.full((1 << 15,), float(rank))
        mc.all_reduce(t, group=group, algorithm="direct")
        seen.append(str(t[::4096].tolist()))
    finally:
        os.environ.pop(TRANSPORT_ENV, None)
    return seen


def shm_close_right_after_send(rank: int) -> str:
    """Rank 0 sends through shared memory and closes at once; rank 1 reads
    the message only later. The close must not take the bytes away."""
    from mycollectives.transport.shm import ShmTransport

    t = ShmTransport(None, timeout=30, eager_bytes=64)
    if rank == 0:
        t.isend(torch.arange(1 << 16, dtype=torch.float32), 1, TAG).wait()
        t.close()
        return "sent"
    if rank == 1:
        time.sleep(0.5)  # the sender has closed by now
        got = torch.empty(1 << 16)
        t.irecv(got, 0, TAG).wait()
        t.close()
        return "ok" if torch.equal(got, torch.arange(1 << 16, dtype=torch.float32)) else "wrong data"
    return "idle"
