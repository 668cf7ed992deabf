"""What ``async_op=True`` returns, and the order in which a group's collectives run.

:class:`Work` and :class:`Lane` live with the transports
(``transport/lane.py``): every transport makes its own lane
(``TransportBase.new_lane``), a virtual cluster's rank a communication
stream. Here the API keeps one lane per transport, made on first use.
"""

from __future__ import annotations

import weakref

from ..transport.lane import Lane, Work

__all__ = ["Lane", "Work", "lane_for"]

_lanes: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def lane_for(transport) -> Lane:
    """The lane of ``transport`` (one per transport, made on first use)."""
    lane = _lanes.get(transport)
    if lane is None:
        lane = _lanes[transport] = transport.new_lane()
    return lane
