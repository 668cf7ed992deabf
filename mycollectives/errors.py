"""Errors a collective raises instead of hanging or corrupting data."""

from __future__ import annotations


class CollectiveError(RuntimeError):
    """A collective could not complete; the message names the collective,
    algorithm, round and peer involved."""


class CollectiveTimeout(CollectiveError, TimeoutError):
    """A peer did not answer within the timeout (it may never have joined)."""


class PeerError(CollectiveError):
    """A peer failed (crashed, raised, or closed its connection) mid-collective."""


class DeadlockError(CollectiveTimeout):
    """Every rank still running waits on another rank, so none can proceed.

    Raised by the local world, which sees all ranks, instead of waiting out
    the timeout; the message says who waits on whom. Chapter 2 shows the
    classic case: blocking sends around a ring, larger than the eager limit.
    """
