"""What ``async_op=True`` returns, and the order in which a group's collectives run.

:class:`Work` and :class:`Lane` live with the transports
(``transport/lane.py``): every transport makes its own lane
(``TransportBase.new_lane``), a virtual cluster's rank a communication
stream, and keeps it (``TransportBase.lane``), so that a lane never outlives
its transport.
"""

from __future__ import annotations

from ..transport.lane import Lane, Work

__all__ = ["Lane", "Work", "lane_for"]


def lane_for(transport) -> Lane:
    """The lane of ``transport`` (one per transport, made on first use, kept on the transport)."""
    return transport.lane()
