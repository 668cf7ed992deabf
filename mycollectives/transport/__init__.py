"""Transports: the only layer that moves bytes (see ``base.py``)."""

from __future__ import annotations

from .base import Done, Label, Message, Transport, TransportDeadlock, TransportPeerError, TransportTimeout
from .local import LocalTransport, LocalWorld, TraceEvent, current_local, run_local

__all__ = [
    "Done",
    "Label",
    "Message",
    "Transport",
    "TransportDeadlock",
    "TransportPeerError",
    "TransportTimeout",
    "LocalTransport",
    "LocalWorld",
    "TraceEvent",
    "current_local",
    "run_local",
    "resolve_group",
]


def resolve_group(group=None) -> Transport:
    """The transport for ``group``: a transport as is, a torch process group,
    or None for the enclosing local world or else torch's default group."""
    if group is None:
        local = current_local()
        if local is not None:
            return local
    elif isinstance(group, Transport):
        return group
    try:
        import torch.distributed as dist
    except ImportError:  # pragma: no cover - torch without distributed
        dist = None
    if dist is None or not dist.is_available():
        raise ValueError("no group given, no local world running, and torch.distributed is unavailable")
    if group is not None and not isinstance(group, dist.ProcessGroup):
        raise TypeError(
            f"group must be a torch.distributed ProcessGroup, a mycollectives transport or None, "
            f"got {type(group).__name__}"
        )
    from .torch_dist import transport_for

    return transport_for(group)
