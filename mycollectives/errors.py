"""Errors a collective raises instead of hanging or corrupting data."""

from __future__ import annotations


class CollectiveError(RuntimeError):
    """A collective could not complete; the message names the collective,
    algorithm, round and peer involved."""


class CollectiveTimeout(CollectiveError, TimeoutError):
    """A peer did not answer within the timeout (it may never have joined)."""


class PeerError(CollectiveError):
    """A peer failed (crashed, raised, or closed its connection) mid-collective."""
