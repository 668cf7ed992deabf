"""Errors a collective raises instead of hanging or corrupting data.

Every failure a caller can meet is one of these, or a ``ValueError`` /
``TypeError`` for a bad argument (naming the rank, the argument and what was
expected): collectives, ``send``/``recv`` and their handles, and the
symmetric heap (``symmetric.rendezvous``, a handle's ``barrier``). The
transports' own errors (``mycollectives.transport.TransportTimeout``,
``TransportPeerError``), which the layers above turn into these with the
call named, are subclasses of :class:`CollectiveTimeout` and
:class:`PeerError`, so none can escape as anything else. A message that is
not the package's taken by a collective's argument check (a stray message
with the package's tag) is a :class:`CollectiveError`.
"""

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
