"""The algorithm exercises test the idea: the messages sent, not only the result.

Each wrong answer here computes the right result but does not send what the
algorithm sends: it passes the data through shared Python state (a board every
rank's thread reads, a ``threading.Barrier``), or sends the right number of
messages to the wrong peers or of the wrong size. The checks must refuse every
one, and still accept the right answers, in either direction round the ranks.
"""

from __future__ import annotations

import threading

import pytest
import torch

import mycollectives as mc
from mycollectives.book.exercises import ExerciseFailure, check_collective
from mycollectives.book.exercises import messages as pattern
from mycollectives.schedule import ceil_log2
from tests.test_exercises_algorithms import SMALL, binomial_broadcast, bruck_all_gather, ring_all_reduce

pytestmark = pytest.mark.timeout(300)


class Board:
    """Shared Python state: every rank's thread writes its data, waits for the others, reads theirs."""

    def __init__(self) -> None:
        self.lock, self.barriers, self.slots = threading.Lock(), {}, {}

    def exchange(self, value) -> list:
        p, r = mc.get_world_size(), mc.get_rank()
        with self.lock:
            barrier = self.barriers.setdefault(p, threading.Barrier(p, timeout=20))
            slots = self.slots.setdefault(p, [None] * p)
        slots[r] = value
        barrier.wait()
        got = list(slots)
        barrier.wait()  # nobody overwrites a slot before everyone has read it
        return got


def shared_all_gather(output, input):
    c = input.numel()
    for q, block in enumerate(Board_all_gather.exchange(input.clone())):
        output[q * c : (q + 1) * c].copy_(block)


def shared_broadcast(tensor, src):
    tensor.copy_(Board_broadcast.exchange(tensor.clone())[src])


def shared_all_reduce(tensor):
    tensor.copy_(torch.stack(Board_all_reduce.exchange(tensor.clone())).sum(0))


def shared_all_to_all(output, input):
    p, r = mc.get_world_size(), mc.get_rank()
    c = input.numel() // p
    for q, theirs in enumerate(Board_all_to_all.exchange(input.clone())):
        output[q * c : (q + 1) * c].copy_(theirs[r * c : (r + 1) * c])


Board_all_gather, Board_broadcast, Board_all_reduce, Board_all_to_all = Board(), Board(), Board(), Board()
Thread_barrier = Board()


def shared_barrier():
    Thread_barrier.exchange(None)


def shared_all_gather_with_right_peers(output, input):
    """Bruck's peers, one element each: the right count and peers, the wrong sizes."""
    r, p = mc.get_rank(), mc.get_world_size()
    d = 1
    while d < p:
        req = mc.isend(torch.zeros(1, dtype=input.dtype), (r - d) % p)
        mc.recv(torch.empty(1, dtype=input.dtype), (r + d) % p)
        req.wait()
        d *= 2
    shared_all_gather(output, input)


def mirrored_bruck(output, input):
    """Bruck's all-gather the other way round: send to rank + d, receive from rank - d."""
    r, p = mc.get_rank(), mc.get_world_size()
    c = input.numel()
    tmp = torch.empty_like(output)  # block i: rank (r - i) % p's block
    tmp[:c].copy_(input)
    d = 1
    while d < p:
        k = min(d, p - d)
        req = mc.isend(tmp[: k * c], (r + d) % p)
        mc.recv(tmp[d * c : (d + k) * c], (r - d) % p)
        req.wait()
        d *= 2
    for i in range(p):
        j = (r - i) % p
        output[j * c : (j + 1) * c].copy_(tmp[i * c : (i + 1) * c])


def dissemination(step: int):
    def barrier():
        p, r = mc.get_world_size(), mc.get_rank()
        d = 1
        while d < p:
            req = mc.isend(torch.zeros(1), (r + step * d) % p)
            mc.recv(torch.empty(1), (r - step * d) % p)
            req.wait()
            d *= 2

    return barrier


def ring_neighbours_barrier():
    """log2 p tokens per rank, always to rank + 1: the right count, the wrong peers."""
    p, r = mc.get_world_size(), mc.get_rank()
    for _ in range(ceil_log2(p)):
        req = mc.isend(torch.zeros(1), (r + 1) % p)
        mc.recv(torch.empty(1), (r - 1) % p)
        req.wait()
    Thread_barrier.exchange(None)


def every_pair_all_to_all(output, input):
    p, r = mc.get_world_size(), mc.get_rank()
    c = input.numel() // p
    output[r * c : (r + 1) * c].copy_(input[r * c : (r + 1) * c])
    for k in range(1, p):
        to, frm = (r + k) % p, (r - k) % p
        req = mc.isend(input[to * c : (to + 1) * c], to)
        mc.recv(output[frm * c : (frm + 1) * c], frm)
        req.wait()


RIGHT = [
    (bruck_all_gather, "all_gather", pattern.bruck),
    (mirrored_bruck, "all_gather", pattern.bruck),
    (dissemination(1), "barrier", pattern.dissemination),
    (dissemination(-1), "barrier", pattern.dissemination),
    (binomial_broadcast, "broadcast", pattern.binomial_tree),
    (ring_all_reduce, "all_reduce", pattern.ring_all_reduce),
    (every_pair_all_to_all, "all_to_all", pattern.every_pair),
]


@pytest.mark.parametrize("fn, collective, messages", RIGHT, ids=lambda x: getattr(x, "__name__", str(x)))
def test_right_answers_send_the_algorithms_messages(fn, collective, messages, capsys):
    assert check_collective(fn, collective, messages=messages, sends_per_rank=None, **SMALL)
    assert "Correct" in capsys.readouterr().out


WRONG = [
    (shared_all_gather, "all_gather", pattern.bruck, r"0 messages sent"),
    (shared_all_gather_with_right_peers, "all_gather", pattern.bruck, r"of \d+ bytes"),
    (shared_barrier, "barrier", pattern.dissemination, r"0 messages sent"),
    (ring_neighbours_barrier, "barrier", pattern.dissemination, r"no message from rank"),
    (shared_broadcast, "broadcast", pattern.binomial_tree, r"0 messages sent"),
    (shared_all_reduce, "all_reduce", pattern.ring_all_reduce, r"sent 0 messages"),
    (shared_all_to_all, "all_to_all", pattern.every_pair, r"0 messages sent"),
]


@pytest.mark.parametrize(
    "fn, collective, messages, says", WRONG, ids=lambda x: getattr(x, "__name__", str(x))
)
def test_results_computed_through_shared_state_are_refused(fn, collective, messages, says):
    """Each of these computes the right result (it passes without ``messages``)..."""
    cases = dict(world_sizes=(4,), counts=(3,), dtypes=(torch.int64,))
    assert check_collective(fn, collective, **cases)
    with pytest.raises(ExerciseFailure, match=says):  # ... and fails on the messages it sent
        check_collective(fn, collective, messages=messages, **cases)


def test_the_pages_pass_the_patterns():
    """The pages' check cells of these exercises pass ``messages=``: without it the cheats pass."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    cell = re.compile(r"^```\{code-cell\}[^\n]*\n(.*?)^```$", re.S | re.M)
    for page, fn, name in [
        ("chapters/03_algorithms.md", "bruck_all_gather", "bruck"),
        ("chapters/03_algorithms.md", "binomial_broadcast", "binomial_tree"),
        ("chapters/03_algorithms.md", "ring_all_reduce", "ring_all_reduce"),
        ("chapters/03b_choosing.md", "dissemination_barrier", "dissemination"),
        ("chapters/02_primitives.md", "my_all_to_all", "every_pair"),
    ]:
        checks = [
            c for c in cell.findall((root / page).read_text()) if re.search(rf"check_collective\(\s*{fn}", c)
        ]
        assert checks and all("messages=" in c and name in c for c in checks), (page, fn)


@pytest.mark.parametrize(
    "page, name, collective, kw",
    [
        ("chapters/03_algorithms.md", "bruck_all_gather", "all_gather", {"messages": pattern.bruck}),
        ("chapters/03_algorithms.md", "binomial_broadcast", "broadcast", {"messages": pattern.binomial_tree}),
        ("chapters/03_algorithms.md", "ring_all_reduce", "all_reduce", {"messages": pattern.ring_all_reduce}),
        ("chapters/03b_choosing.md", "dissemination_barrier", "barrier", {"messages": pattern.dissemination}),
        ("chapters/02_primitives.md", "my_all_to_all", "all_to_all", {"messages": pattern.every_pair}),
    ],
    ids=lambda x: x if isinstance(x, str) and "/" not in x else "",
)
def test_the_pages_solutions_send_their_algorithms_messages(page, name, collective, kw, capsys):
    from pathlib import Path

    from tests.test_exercises_hidden import cells, exercises

    text = (Path(__file__).resolve().parent.parent / page).read_text()
    solutions = [c for _, after in exercises(text) for c in cells(after.split("````{solution-end}")[0])]
    code = next(c for c in solutions if f"def {name}(" in c)
    ns = {"mc": mc, "torch": torch}
    exec(code, ns)  # noqa: S102 - the page's own solution
    assert check_collective(ns[name], collective, **kw, **SMALL)
    assert "Correct" in capsys.readouterr().out
