"""What every transport offers: the only layer of the package that moves bytes.

A transport is one rank's end of a communicator. Besides point-to-point
``isend``/``irecv``, it has ``exchange``, which posts all of one round's
sends and receives together (NCCL needs that to avoid deadlock; other
backends simply post them one by one), with the collectives' own tag. Handles have ``wait(timeout)`` and
raise :class:`TransportTimeout` or :class:`TransportPeerError`; the executor
turns those into errors that name the collective, round and peer.
"""

from __future__ import annotations

import math
import numbers
import os
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import torch

from ..errors import CollectiveTimeout, PeerError

# The tag of every message of a collective. A user's own send and receive
# (tag 0 by default, as in torch.distributed) never match a collective's
# messages, so a user message still in flight cannot be taken by a collective
# called meanwhile, nor the other way round. Tags from this value up are the
# package's own: ``send``/``recv`` refuse them (:func:`user_tag`).
COLLECTIVE_TAG = 1 << 28
TIMEOUT_ENV = "MYCOLLECTIVES_TIMEOUT"


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


def env_timeout(default: float) -> float:
    """``MYCOLLECTIVES_TIMEOUT`` in seconds (``default`` where unset or empty),
    refused with an error naming it unless a positive, finite number."""
    raw = os.environ.get(TIMEOUT_ENV, "").strip()
    if not raw:
        return float(default)
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{TIMEOUT_ENV}={raw!r}: expected a positive, finite number of seconds")
    return value


class _PeerNamed(Exception):
    """An error that may say which peer it is about (``peer``, or None)."""

    def __init__(self, *args, peer: int | None = None):
        super().__init__(*args)
        self.peer = peer


class TransportTimeout(_PeerNamed, CollectiveTimeout):
    """No matching message (or no taker for ours) within the timeout.

    The layers above turn it into a :class:`~mycollectives.errors.CollectiveTimeout`
    that names the call; it is one already, so none can reach a user as
    anything else."""


class NotInGroup(ValueError):
    """This rank is not a member of the process group it was given: as in
    torch.distributed, a call on such a group does nothing."""


class TransportDeadlock(TransportTimeout):
    """Every rank still running waits on another: nothing can ever arrive.

    Only the local world can see all ranks at once and so detect this; the
    message says who waits on whom.
    """


class TransportPeerError(_PeerNamed, PeerError):
    """The peer is gone: it crashed, raised, or closed the connection (a
    :class:`~mycollectives.errors.PeerError`, as for :class:`TransportTimeout`)."""


@dataclass(frozen=True)
class Label:
    """Which collective, algorithm and round a message belongs to (for traces)."""

    collective: str = "p2p"
    algorithm: str = ""
    round: int = -1


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


@runtime_checkable
class Transport(Protocol):
    rank: int
    world_size: int
    timeout: float
    device: torch.device
    local: bool  # ranks are threads of one process (any device; async calls run at once)

    def isend(self, tensor: torch.Tensor, dst: int, tag: int = 0, label: Label | None = None) -> Work: ...

    def irecv(self, tensor: torch.Tensor, src: int, tag: int = 0, label: Label | None = None) -> Work: ...

    def exchange(
        self, sends: list[Message], recvs: list[Message], label: Label
    ) -> tuple[list[Work], list[Work]]: ...

    def group_rank(self, rank: int) -> int:
        """The rank within this communicator of a rank as the caller names it."""
        ...


class Done:
    """A handle for something already finished (a send whose bytes are in place)."""

    def wait(self, timeout: float | None = None) -> bool:
        return True

    def is_completed(self) -> bool:
        return True
