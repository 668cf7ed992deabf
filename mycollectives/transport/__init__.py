"""Transports: the only layer that moves bytes (see ``base.py``).

``local`` runs ranks as threads of one process; ``torch_dist`` sends through
a torch process group (gloo, NCCL); ``shm`` moves the bytes of CPU ranks on
one host through shared memory. Every transport subclasses
:class:`TransportBase` (``base.py``), which declares each extension point
with a default; :func:`bind` makes one this thread's current transport.
:func:`resolve_group` turns a call's
``group`` into a transport, choosing with :func:`transport_for` from the one
table :data:`TRANSPORTS` (:func:`register_transport` adds an entry). What a
transport can do it declares (``contract``: messages, loads from a heap,
received messages read in place).
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable

from .base import (
    NotInGroup,
    SubGroup,
    Transport,
    TransportBase,
    TransportDeadlock,
    TransportPeerError,
    TransportTimeout,
)
from .contract import Capabilities, HostsHeap, PricesLoads, ReadsInPlace, capabilities
from .local import LocalTransport, LocalWorld, TraceEvent, bind, current_local, run_local
from .message import COLLECTIVE_TAG, Done, Label, Message

__all__ = [
    "COLLECTIVE_TAG",
    "NotInGroup",
    "Done",
    "Label",
    "Message",
    "Transport",
    "TransportBase",
    "SubGroup",
    "bind",
    "cache_transport",
    "TransportDeadlock",
    "TransportPeerError",
    "TransportTimeout",
    "LocalTransport",
    "LocalWorld",
    "TraceEvent",
    "current_local",
    "run_local",
    "resolve_group",
    "transport_for",
    "TRANSPORT_ENV",
    "TRANSPORTS",
    "register_transport",
    "Capabilities",
    "HostsHeap",
    "PricesLoads",
    "ReadsInPlace",
    "capabilities",
]

TRANSPORT_ENV = "MYCOLLECTIVES_TRANSPORT"
Factory = Callable[[object, "float | None"], TransportBase]  # (process group, set-up timeout) -> transport


def _group_transport(group, timeout: float | None) -> TransportBase:
    from .torch_dist import TorchDistTransport

    return TorchDistTransport(group)


def _shm_transport(group, timeout: float | None) -> TransportBase:
    from .shm import ShmTransport

    return ShmTransport(group, setup_timeout=timeout)


# The one table transports are chosen from: MYCOLLECTIVES_TRANSPORT names an
# entry (the first is the default); a new transport is one more entry.
TRANSPORTS: dict[str, Factory] = {"group": _group_transport, "shm": _shm_transport}
_transports: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def register_transport(name: str, factory: Factory) -> None:
    """Add a transport to the table, for ``MYCOLLECTIVES_TRANSPORT={name}``:
    ``factory(group, timeout)`` builds one rank's end for a process group."""
    if not name or name in TRANSPORTS:
        raise ValueError(f"register_transport: {name!r} is empty or taken; the table has {tuple(TRANSPORTS)}")
    TRANSPORTS[name] = factory


def cache_transport(group, transport: TransportBase) -> None:
    """Make ``transport`` the one :func:`transport_for` returns for the process group ``group``
    (torchpg's groups of a thread world are served by the thread world's transports)."""
    _transports[group] = transport


def resolve_group(group=None, timeout: float | None = None) -> TransportBase:
    """The transport for ``group``: a transport as is, a torch process group,
    or None for the enclosing local world or else torch's default group.
    Raises :class:`NotInGroup` for a group this rank is not in; ``timeout``
    bounds a transport's collective set-up on first use."""
    if group is None:
        local = current_local()
        if local is not None:
            return local
    elif isinstance(group, TransportBase):
        return group
    try:
        import torch.distributed as dist
    except ImportError:  # pragma: no cover - torch without distributed
        dist = None
    if dist is None or not dist.is_available():
        raise ValueError("no group given, no local world running, and torch.distributed is unavailable")
    if group is dist.GroupMember.NON_GROUP_MEMBER:
        raise NotInGroup("this rank is not a member of the group")
    if group is not None and not isinstance(group, dist.ProcessGroup):
        raise TypeError(
            f"group must be a torch.distributed ProcessGroup, a mycollectives transport or None, "
            f"got {type(group).__name__}"
        )
    return transport_for(group, timeout)


def transport_for(group=None, timeout: float | None = None):
    """One cached transport per process group (None: the default group).

    ``MYCOLLECTIVES_TRANSPORT`` picks its kind from :data:`TRANSPORTS`, the
    same on every rank: ``group`` (the default, the process group's own send
    and receive) or ``shm`` (:class:`~mycollectives.transport.shm.ShmTransport`,
    for ranks on one host). The cache is keyed weakly by the group and
    transports hold their group weakly, so destroying a group frees its
    transport too. ``timeout`` bounds the set-up of a transport whose
    construction is collective (shared memory's).
    """
    import torch.distributed as dist

    key = dist.group.WORLD if group is None else group
    if key is None:
        raise ValueError(
            "no group given, and this thread runs no rank (of a local world or a virtual run) and "
            "torch.distributed is not initialized; a thread started inside a rank: pass group= the rank's "
            "transport"
        )
    t = _transports.get(key)
    if t is None:
        default = next(iter(TRANSPORTS))
        kind = os.environ.get(TRANSPORT_ENV, default) or default
        if kind not in TRANSPORTS:
            raise ValueError(f"{TRANSPORT_ENV}={kind!r}: expected one of {tuple(TRANSPORTS)}")
        t = _transports[key] = TRANSPORTS[kind](key, timeout)
    return t
