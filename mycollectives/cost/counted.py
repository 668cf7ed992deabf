"""Counting a schedule's cost round by round (chapter 3, "Cost formulas").

The alpha-beta-gamma model (Hockney's alpha-beta, ``hockney1994``, plus a reduction term, as
used by Thakur, Rabenseifner and Gropp 2005, ``thakur2005``) charges a rank

* ``alpha`` seconds for every message it sends or receives in a round (its
  single port takes them one after another),
* ``beta`` seconds for every byte it sends or receives (full duplex: sending
  and receiving overlap, so the larger of the two counts),
* ``gamma`` seconds for every byte it reduces on arrival.

On symmetric memory (``Machine(loads=True)``, :mod:`mycollectives.loadstore`)
a round is one barrier (``alpha``, however many peers a rank reads) and a
rank's time is the bytes it *reads* (a source does nothing: its peers load
from it) plus what it reduces.

A round lasts as long as its busiest rank; a schedule lasts the sum of its
rounds (the synchronous meaning of a round, see ``schedule.py``). Local copies
(``src == dst``) cross no link and cost nothing here. Several transfers from
the same source to the same destination in one round are one message (the
two pieces of a wrapped Bruck block, say).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..schedule import Round, Schedule


@dataclass(frozen=True)
class Machine:
    """Model parameters: ``alpha`` (s per message), ``beta`` (s per byte),
    ``gamma`` (s per byte reduced); with ``loads``, ``alpha`` is per round (a
    barrier) and ``beta`` per byte read (see the module)."""

    alpha: float = 1e-6
    beta: float = 1e-9
    gamma: float = 0.0
    loads: bool = False

    def time(self, messages, nbytes, reduced=0.0):
        """``alpha * messages + beta * nbytes + gamma * reduced``."""
        return self.alpha * messages + self.beta * nbytes + self.gamma * reduced


@dataclass(frozen=True)
class RoundLoad:
    """Per-rank load of one round: messages, bytes and bytes reduced (length ``p``)."""

    messages: np.ndarray
    nbytes: np.ndarray
    reduced: np.ndarray
    read: np.ndarray  # bytes received: what a rank loads on symmetric memory


def round_load(r: Round, p: int, itemsize: int) -> RoundLoad:
    """What each rank sends, receives and reduces in round ``r``."""
    remote = r.src != r.dst
    src, dst = r.src[remote], r.dst[remote]
    nb = r.count[remote] * itemsize
    pair = np.unique(src * p + dst)  # distinct (src, dst) messages
    msgs_out = np.bincount(pair // p, minlength=p)
    msgs_in = np.bincount(pair % p, minlength=p)
    sent = np.bincount(src, weights=nb, minlength=p)
    recv = np.bincount(dst, weights=nb, minlength=p)
    red = np.bincount(dst, weights=nb * r.reduce[remote], minlength=p)
    return RoundLoad(np.maximum(msgs_out, msgs_in), np.maximum(sent, recv), red, recv)


def round_times(schedule: Schedule, machine: Machine, itemsize: int = 4) -> np.ndarray:
    """Time of each round: the busiest rank's ``alpha m + beta b + gamma r``."""
    p = schedule.world_size
    out = np.zeros(len(schedule.rounds))
    for i, r in enumerate(schedule.rounds):
        load = round_load(r, p, itemsize)
        if machine.loads:
            out[i] = machine.time(1, load.read, load.reduced).max() if p else 0.0
        else:
            out[i] = machine.time(load.messages, load.nbytes, load.reduced).max() if p else 0.0
    return out


def counted_cost(schedule: Schedule, machine: Machine, itemsize: int = 4) -> float:
    """Alpha-beta-gamma time of a schedule, counted from its rounds.

    >>> from mycollectives.algorithms import Spec, build
    >>> s = build(Spec("all_reduce", 4, count=8), "ring")
    >>> counted_cost(s, Machine(alpha=1.0, beta=0.0))  # 2(p-1) rounds
    6.0
    """
    return float(round_times(schedule, machine, itemsize).sum())


def traffic(
    schedule: Schedule, itemsize: int = 4, local_size: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Bytes each rank sends and receives over the whole schedule (local
    copies excluded): what chapter 2 compares with the collective's bound.

    With ``local_size`` (ranks ``i*L .. i*L+L-1`` share node ``i``) only the
    transfers between two nodes count: what crosses the network (chapter 4).

    >>> from mycollectives.algorithms import schedule_for
    >>> sent, received = traffic(schedule_for("all_reduce", "ring", 4, 1 << 20))
    >>> sent.tolist() == received.tolist() == [1.5 * (1 << 20)] * 4  # 2(p-1)/p of the vector
    True
    >>> traffic(schedule_for("all_reduce", "ring", 4, 1 << 20), local_size=2)[0].tolist()  # ranks 1 and 3
    [0.0, 1572864.0, 0.0, 1572864.0]
    """
    p = schedule.world_size
    sent, received = np.zeros(p), np.zeros(p)
    for rnd in schedule.rounds:
        remote = rnd.src != rnd.dst
        if local_size:
            remote &= rnd.src // local_size != rnd.dst // local_size
        nbytes = rnd.count[remote] * itemsize
        np.add.at(sent, rnd.src[remote], nbytes)
        np.add.at(received, rnd.dst[remote], nbytes)
    return sent, received
