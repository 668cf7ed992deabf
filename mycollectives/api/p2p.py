"""Point-to-point: ``send``, ``recv``, ``isend``, ``irecv``, as in torch.distributed."""

from __future__ import annotations

import warnings

import torch

from .. import flight
from ..errors import CollectiveTimeout, DeadlockError, PeerError
from ..transport import Label, NotInGroup, resolve_group
from ..transport.base import TransportDeadlock, TransportPeerError, TransportTimeout
from ..transport.message import user_tag
from .checks import Checker


def _peer(fn: str, tensor, peer, group_peer, arg: str, group, tag=0):
    """The transport and the peer's group rank; None for a rank outside ``group``.
    ``tag`` must be a user's (below the package's own, ``COLLECTIVE_TAG``)."""
    try:
        t = resolve_group(group)
    except NotInGroup:
        warnings.warn(f"{fn}: this rank is not in the group, so the call does nothing", stacklevel=3)
        return None
    c = Checker(fn, t.rank, t.world_size, None if t.local else t.device)
    c.tensor("tensor", tensor)
    user_tag(fn, t.rank, tag)
    r = c.root(arg, peer, group_peer, t.group_rank)
    if r == t.rank:
        raise c.fail(arg, f"is this rank ({t.rank}); a rank cannot send to or receive from itself")
    return t, r


def _post(post, what: str, timeout: float, note):
    """``post()`` (a transport's isend or irecv), a failure at once (gloo's,
    when the peer is already gone) turned into the package's error."""
    try:
        return post()
    except TransportTimeout as e:
        raise flight.fail(note, CollectiveTimeout(f"{what}: {e}")) from e
    except TransportPeerError as e:
        raise flight.fail(note, PeerError(f"{what}: {e}")) from e


class _P2PWork:
    """A handle whose ``wait()`` raises errors that name the peer (and tells the flight recorder)."""

    def __init__(self, work, what: str, timeout: float, note=None):
        self.work, self.what, self.timeout, self.note = work, what, timeout, note

    def is_completed(self) -> bool:
        return self.work.is_completed()

    def wait(self, timeout: float | None = None) -> bool:
        flight.waiting(self.note)
        try:
            out = self.work.wait(timeout or self.timeout)
        except TransportDeadlock as e:
            raise flight.fail(self.note, DeadlockError(f"{self.what}: {e}")) from e
        except TransportTimeout as e:
            raise flight.fail(
                self.note, CollectiveTimeout(f"{self.what}: timed out after {timeout or self.timeout:g} s")
            ) from e
        except TransportPeerError as e:
            raise flight.fail(self.note, PeerError(f"{self.what}: {e}")) from e
        flight.done(self.note)
        return out


@torch.no_grad()
def isend(
    tensor: torch.Tensor, dst: int | None = None, group=None, tag: int = 0, group_dst: int | None = None
) -> _P2PWork:
    """Start sending ``tensor`` to rank ``dst``; returns a handle with ``wait()``.

    Do not modify ``tensor`` before the handle's ``wait()`` returns. A user's
    messages never match a collective's (those have a tag of their own):
    ``tag`` must be in ``[0, 2**28)``, the tags above are the package's.
    """
    if (found := _peer("isend", tensor, dst, group_dst, "dst", group, tag)) is None:
        return None
    t, r = found
    note = flight.p2p(t, "send", r, tensor)
    what = f"isend on rank {t.rank} to rank {r}"
    work = _post(lambda: t.isend(tensor, r, tag, Label("send")), what, t.timeout, note)
    return _P2PWork(work, what, t.timeout, note)


@torch.no_grad()
def irecv(
    tensor: torch.Tensor, src: int | None = None, group=None, tag: int = 0, group_src: int | None = None
) -> _P2PWork:
    """Start receiving into ``tensor`` from rank ``src``; returns a handle with ``wait()``."""
    if (found := _peer("irecv", tensor, src, group_src, "src", group, tag)) is None:
        return None
    t, r = found
    note = flight.p2p(t, "recv", r, tensor)
    what = f"irecv on rank {t.rank} from rank {r}"
    work = _post(lambda: t.irecv(tensor, r, tag, Label("recv")), what, t.timeout, note)
    return _P2PWork(work, what, t.timeout, note)


@torch.no_grad()
def send(
    tensor: torch.Tensor, dst: int | None = None, group=None, tag: int = 0, group_dst: int | None = None
) -> None:
    """Send ``tensor`` to rank ``dst`` and wait until it has been handed over.

    Example, on two ranks::

        if rank == 0: mc.send(torch.tensor([1., 2.]), dst=1)
        if rank == 1: t = torch.empty(2); mc.recv(t, src=0)
        t  # tensor([1., 2.]) on rank 1, after
    """
    work = isend(tensor, dst, group, tag, group_dst)
    if work is not None:
        work.wait()


@torch.no_grad()
def recv(
    tensor: torch.Tensor, src: int | None = None, group=None, tag: int = 0, group_src: int | None = None
) -> int:
    """Receive into ``tensor`` from rank ``src``; returns ``src``.

    Unlike torch.distributed, ``src`` is required: a receive from any
    source has no place in the schedules this package teaches.
    """
    work = irecv(tensor, src, group, tag, group_src)
    if work is None:
        return -1  # not in the group, as torch.distributed answers
    work.wait()
    return src if src is not None else group_src
