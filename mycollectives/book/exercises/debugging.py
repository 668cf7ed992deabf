"""Check functions for the exercises of chapter 6 (Slow and hung collectives).

Each exercise's numbers are in ``QUESTIONS`` (the notebook prints them);
each ``check_*`` computes the expected answer here, from the package (nccl-tests'
busbw factors in the collectives' records, the cost model's ring all-reduce,
the flight recorder and the doctor), raises ``AssertionError`` saying what is
wrong, or prints what was right.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from ...collectives import busbw_factor
from ...cost import Machine, closed_form
from .answers import near, number

NOT_ANSWERED = "not answered yet: set {} in the cell above and run this cell again"


def _answered(answer: object, what: str) -> bool:
    """False, after saying so (and nothing about the answer), while ``answer`` is the placeholder."""
    if answer is None:
        print(NOT_ANSWERED.format(what))
        return False
    return True


def _judge(answer: object, want: float, what: str, unit: str, mistakes: dict[str, float], hint: str) -> None:
    """Pass (one line) when ``answer`` is within 2% of ``want``; else fail naming the typical mistake it
    matches (``mistakes``: what the mistake is -> the value it gives), or with ``hint`` on how to get it;
    never printing ``want``."""
    got = number(answer, what)
    if near(got, want, 0.02):
        print(f"Correct: {what} = {got:.4g}{unit}")
        return
    for mistake, value in mistakes.items():
        if near(got, value, 0.02):
            raise AssertionError(f"{what}: got {got:.4g}{unit}: {mistake}")
    side = "too high" if got > want else "too low"
    raise AssertionError(f"{what}: got {got:.4g}{unit}, {side}; {hint}")


GB = 1e9
MIB = 1 << 20

QUESTIONS = {
    # nccl-tests' all_reduce_perf on 32 ranks (4 nodes of 8): one line of its output (not the
    # chapter's worked line, 8 GiB on 16 ranks, whose answer the chapter prints)
    "decode": dict(collective="all_reduce", ranks=32, size=4 << 30, time_us=30_200.0),
    # all_reduce_perf on 8 B300 in one node with NVLink SHARP: the busbw NVIDIA/nccl#2140 reports
    # (not the chapter's 8 H100 at 480 GB/s, whose link rate the chapter's figure prints)
    "nvls": dict(ranks=8, busbw=845.0),
    # a ring all-reduce over 4 nodes of 8 GPUs, one NIC per GPU, 8 NICs a node (not the chapter's
    # worked 2-node ring at 360 GB/s, whose answer the chapter prints)
    "per_nic": dict(nodes=4, gpus_per_node=8, nics_per_node=8, busbw=344.0),
    # alltoall_perf over 6 nodes of 8 GPUs, one 400 Gb/s NIC per GPU giving 48 GB/s (the chapter's
    # table prints 1, 2, 4, 8, 32 and 128 nodes)
    "alltoall": dict(nodes=6, gpus_per_node=8, nic=48.0),
    # DDP's gradient buckets: a ring all-reduce of each bucket on 4 ranks
    "bucket": dict(ranks=4, alpha=30e-6, bandwidth=5e9, overhead=0.10),
}


def check_busbw(answer: float | None) -> None:
    """``QUESTIONS["decode"]``: the busbw (GB/s) nccl-tests prints for that line."""
    if not _answered(answer, "busbw"):
        return
    q = QUESTIONS["decode"]
    algbw = q["size"] / (q["time_us"] * 1e-6) / GB
    factor = busbw_factor(q["collective"], q["ranks"])
    mistakes = {
        "that is the algbw (size over time); busbw multiplies it by the collective's factor": algbw,
        "the factor for all-reduce is 2(n-1)/n, not 2": 2 * algbw,
        "that factor is all-gather's, (n-1)/n; all-reduce moves twice as much": algbw * factor / 2,
        "nccl-tests counts GB as 10^9 bytes, not 2^30": algbw * factor * GB / (1 << 30),
    }
    _judge(answer, algbw * factor, "busbw", " GB/s", mistakes, "algbw = size / time in GB/s, then the factor")


def check_nvls_link_rate(answer: float | None) -> None:
    """``QUESTIONS["nvls"]``: GB/s each GPU's NVLink carries each way while NVLS reaches that busbw.

    NVLS pushes every byte of a GPU's vector into the switch and pulls the sum
    back, plus its ``1/n`` share reduced on the way: ``(n + 1)/n`` bytes each
    way per byte of the vector, where a ring moves ``2(n - 1)/n``.
    """
    if not _answered(answer, "nvlink_each_way"):
        return
    q = QUESTIONS["nvls"]
    n = q["ranks"]
    algbw = q["busbw"] / busbw_factor("all_reduce", n)
    mistakes = {
        "that is the busbw itself, a convention of the benchmark (a ring's traffic), not what NVLS puts on the link": q[
            "busbw"
        ],
        "that is the algbw; NVLS moves a little more than one byte each way per byte of the vector": algbw,
        "(n+1)/n per byte is right, but of the algbw, not of the busbw": q["busbw"] * (n + 1) / n,
    }
    _judge(
        answer,
        algbw * (n + 1) / n,
        "NVLink traffic per GPU, each way",
        " GB/s",
        mistakes,
        "turn the busbw back into algbw, then count the bytes NVLS sends each way per byte",
    )


def check_per_nic(answer: float | None) -> None:
    """``QUESTIONS["per_nic"]``: GB/s each NIC carries each way in that ring all-reduce.

    The ring's data is split over one ring per NIC (NCCL's channels, rail by
    rail); every ring leaves each node once, and every link of a ring carries
    the busbw's share of its ring: each NIC carries ``busbw / NICs per node``.
    """
    if not _answered(answer, "per_nic"):
        return
    q = QUESTIONS["per_nic"]
    gpus = q["nodes"] * q["gpus_per_node"]
    mistakes = {
        "that is the busbw of the whole node; it is split over the node's NICs": q["busbw"],
        "divide by the NICs of one node (one ring each), not by every GPU of the job": q["busbw"] / gpus,
        "busbw is already the ring's traffic per link: do not divide it by the all-reduce factor again": q[
            "busbw"
        ]
        / busbw_factor("all_reduce", gpus)
        / q["nics_per_node"],
    }
    _judge(
        answer,
        q["busbw"] / q["nics_per_node"],
        "traffic per NIC, each way",
        " GB/s",
        mistakes,
        "each NIC carries one ring, and a ring's link carries the busbw",
    )


def check_alltoall_busbw(answer: float | None) -> None:
    """``QUESTIONS["alltoall"]``: the busbw alltoall_perf should show when the NICs limit it.

    Of a rank's buffer, the share for ranks on other nodes, ``(N - 1)/N``,
    crosses its NIC; the time is that share over the NIC's rate, and nccl-tests'
    all-to-all factor ``(n - 1)/n`` turns the algbw into busbw (nccl-tests issue #130).
    """
    if not _answered(answer, "a2a_busbw"):
        return
    q = QUESTIONS["alltoall"]
    nodes, n = q["nodes"], q["nodes"] * q["gpus_per_node"]
    algbw = q["nic"] / ((nodes - 1) / nodes)
    factor = busbw_factor("all_to_all", n)
    mistakes = {
        "that is the NIC's rate; only the blocks for other nodes cross it, and busbw has a factor": q["nic"],
        "that is the algbw: nccl-tests multiplies it by (n-1)/n for all-to-all": algbw,
        "only (N-1)/N of the buffer, for the other nodes, crosses the NIC: the algbw is higher than "
        "the NIC's rate": q["nic"] * factor,
        "(N-1)/N counts nodes, not GPUs": q["nic"] / ((n - 1) / n) * factor,
    }
    _judge(
        answer,
        algbw * factor,
        "alltoall busbw",
        " GB/s",
        mistakes,
        "the time is the bytes for other nodes over the NIC's rate; then nccl-tests' factor",
    )


def bucket_overhead(bucket_bytes: float) -> float:
    """The share of a bucketed ring all-reduce's time spent on per-message latency (``QUESTIONS["bucket"]``)."""
    q = QUESTIONS["bucket"]
    count = max(int(bucket_bytes) // 4, 1)
    full = closed_form("all_reduce", "ring", q["ranks"], count, Machine(q["alpha"], 1 / q["bandwidth"]))
    latency = closed_form("all_reduce", "ring", q["ranks"], count, Machine(q["alpha"], 0.0))
    return latency / full


def check_bucket_size(answer_mib: float | None) -> None:
    """``QUESTIONS["bucket"]``: the smallest ``bucket_cap_mb`` (MiB, as DDP reads it) whose
    all-reduces spend at most that share of their time on latency (within 10% above it)."""
    if not _answered(answer_mib, "bucket_cap_mb"):
        return
    q = QUESTIONS["bucket"]
    lo, hi = 1.0, float(1 << 40)
    while hi - lo > 1:  # the smallest bucket meeting the target, by bisection on the cost model
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if bucket_overhead(mid) > q["overhead"] else (lo, mid)
    best = hi / MIB
    got = number(answer_mib, "bucket_cap_mb")
    share = bucket_overhead(got * MIB)
    assert share <= q["overhead"] * 1.001, (
        f"buckets of {got:.3g} MiB spend {100 * share:.1f}% of their time on latency, above "
        f"{100 * q['overhead']:.0f}%: they are too small"
    )
    assert got <= best * 1.1, (
        f"{got:.3g} MiB meets the target, but a smaller bucket does too: look for the smallest"
    )
    print(f"Correct: bucket_cap_mb = {got:.3g} (latency is {100 * share:.1f}% of each all-reduce)")


# --- the mystery: a job's flight records, one rank at fault -----------------------------


def mystery(directory: str | os.PathLike) -> Path:
    """Run a small training loop on a local world of four ranks, one rank misbehaving, and
    leave every rank's flight record in ``directory``; returns it."""
    from ... import api, flight
    from ...errors import CollectiveError
    from ...flight.files import dump
    from ...transport import LocalWorld

    directory = Path(directory)
    old = os.environ.get("MYCOLLECTIVES_FLIGHT_DIR")
    os.environ["MYCOLLECTIVES_FLIGHT_DIR"] = str(directory)
    try:

        def step(rank: int) -> None:
            for i in range(4):
                api.all_reduce(torch.ones(512))
                if not (rank == 3 and i == 2):  # rank 3 has no statistic to share at step 2
                    api.all_gather_into_tensor(torch.empty(4 * 16), torch.ones(16))
                api.broadcast(torch.ones(8), src=0)

        def body(rank: int) -> None:
            try:
                step(rank)
            except (CollectiveError, ValueError):
                pass

        world = LocalWorld(4, timeout=5.0)  # held until the dump: a freed world's recorders go with it
        world.run(body)
        job = flight.recorder(world.transports[0]).job
        dump(reason="request", directory=directory, job=job)  # this world's ranks only
    finally:
        if old is None:
            os.environ.pop("MYCOLLECTIVES_FLIGHT_DIR", None)
        else:
            os.environ["MYCOLLECTIVES_FLIGHT_DIR"] = old
    return directory


def check_diagnosis(answer: dict | None) -> None:
    """The rank at fault in :func:`mystery`'s records, the sequence number, and the kind of fault:
    ``{"rank": ..., "seq": ..., "kind": ...}`` with ``kind`` one of "skipped", "order",
    "mismatch", "straggler", "died"."""
    if not _answered(answer, "answer"):
        return
    assert isinstance(answer, dict) and {"rank", "seq", "kind"} <= set(answer), (
        'answer with a dict: {"rank": ..., "seq": ..., "kind": ...}'
    )
    want = {"rank": 3, "seq": 7, "kind": "skipped"}
    assert answer["seq"] == want["seq"], (
        f"seq {answer['seq']!r} is not where the ranks' records first part: read the table row by row "
        "and find the first sequence number at which one rank's call differs from the others'"
    )
    assert answer["rank"] == want["rank"], (
        f"rank {answer['rank']!r} made the same call as most ranks at seq {want['seq']}: the odd rank is "
        "the one whose call differs"
    )
    assert answer["kind"] == want["kind"], (
        f"{answer['kind']!r}: compare the odd rank's call with what the loop calls next; a rank that made "
        "the call that comes next skipped one"
    )
    print("Correct: rank 3 skipped the all-gather at seq 7 (step 2) and called the broadcast that follows it")
