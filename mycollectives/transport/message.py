"""What travels between two ends of a transport: tags, labels, messages and handles.

Every transport speaks this vocabulary (``base.py`` declares what a
transport does with it). A collective's messages carry ``COLLECTIVE_TAG``
and a ``Label`` naming the call, algorithm, round and strand; each send or
receive of a round is a ``Message``: a tensor, the peer, and the buffer
pieces it carries, for the trace. A posted send or receive is a ``Work``
with ``wait``; ``Done`` is the handle of one already finished.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Protocol

import torch

# The tag of every message of a collective. A user's own send and receive
# (tag 0 by default, as in torch.distributed) never match a collective's
# messages, so a user message still in flight cannot be taken by a collective
# called meanwhile, nor the other way round. Tags from this value up are the
# package's own: ``send``/``recv`` refuse them (:func:`user_tag`).
COLLECTIVE_TAG = 1 << 28


def user_tag(fn: str, rank: int, tag) -> int:
    """``tag`` of a user's ``send``/``recv``, checked: an int in ``[0, COLLECTIVE_TAG)``.

    Tags from ``COLLECTIVE_TAG`` up are the package's own (a user message
    with one would be taken by the next collective); gloo refuses negative
    ones."""
    if not isinstance(tag, numbers.Integral) or isinstance(tag, bool):
        raise TypeError(f"{fn} on rank {rank}: argument 'tag' must be an int, got {tag!r}")
    if not 0 <= tag < COLLECTIVE_TAG:
        raise ValueError(
            f"{fn} on rank {rank}: argument 'tag' must be in [0, {COLLECTIVE_TAG}) (2**28), got {tag}; "
            "tags from 2**28 up are reserved for the package's collectives"
        )
    return int(tag)


@dataclass(frozen=True)
class Label:
    """Which collective, algorithm and round a message belongs to (for traces)."""

    collective: str = "p2p"
    algorithm: str = ""
    round: int = -1
    strand: int = 0  # which strand of the call's channels (``plan.strands``), where they run apart


@dataclass
class Message:
    """One message of a round: a tensor, the peer, and the buffer pieces it
    carries, ``((buffer, offset, count), ...)``, for the trace."""

    tensor: torch.Tensor
    peer: int
    pieces: tuple = ()
    channel: int = -1  # the schedule's channel of every piece (-1: several, or none); a virtual run's rail


class Work(Protocol):
    def wait(self, timeout: float | None = None) -> bool: ...


class Done:
    """A handle for something already finished (a send whose bytes are in place)."""

    def wait(self, timeout: float | None = None) -> bool:
        return True

    def is_completed(self) -> bool:
        return True
