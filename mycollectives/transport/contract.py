"""What a transport declares it can do (:class:`Capabilities`), read by the
executor, the load/store path and the API instead of probing objects.

Every transport has a ``capabilities`` attribute (``TransportBase``'s
default: it moves messages, and its ranks can share a heap of symmetric
memory when they are processes rather than the threads of a local world). A transport that can hand a received message over where it lies
(shared memory) declares ``read_in_place`` and offers :class:`ReadsInPlace`'s
two methods: the executor then reduces straight from there, with no copy.
One that prices a schedule as a whole before its messages move (the virtual
cluster) declares ``prices_schedules`` and offers :class:`PricesSchedules`'s
``begin``, which the executor calls before a schedule's first round.
One whose ranks share an address space and keep a heap of symmetric memory
themselves (the virtual cluster's threads) declares ``heap_loads`` and
``hosts_heap`` and offers :class:`HostsHeap`'s ``join_heap``, the
rendezvous; its handles may declare ``prices_loads`` and offer
:class:`PricesLoads`, which the load/store path tells what each round reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch


@dataclass(frozen=True)
class Capabilities:
    messages: bool = True  # send, recv and a round's exchange (the executor's path)
    heap_loads: bool = False  # its group can rendezvous symmetric memory (the load/store path)
    read_in_place: bool = False  # offers held() and release() (ReadsInPlace)
    prices_schedules: bool = False  # offers begin() (PricesSchedules)
    hosts_heap: bool = False  # offers join_heap() (HostsHeap): its own rendezvous of symmetric memory


class ReadsInPlace(Protocol):
    """A transport whose received messages can be read where they lie."""

    def held(self, work, timeout: float | None = None) -> torch.Tensor | None:
        """The message ``work`` receives, where it lies (waiting for it), or
        None where this message is not held so (then ``work.wait()`` as usual)."""
        ...

    def release(self, work) -> None:
        """Done reading what :meth:`held` returned: the sender may reuse the space."""
        ...


class PricesSchedules(Protocol):
    """A transport told of each schedule before its messages move (to price its rounds)."""

    def begin(self, schedule, label: str = "") -> None:
        """``schedule`` starts on this rank, as the call named ``label``."""
        ...


class HostsHeap(Protocol):
    """A transport that rendezvouses symmetric memory itself (its ranks share one address space)."""

    def join_heap(self, block, control: bool = False):
        """The handle of ``block`` (a :class:`~mycollectives.symmetric.heap.Block`, None where this
        rank's tensor is outside the heap) mapped on every rank of the group; collective. ``control``:
        the group's control block (the argument check's). Raises ``ValueError`` on every rank alike."""
        ...


class PricesLoads(Protocol):
    """A handle of symmetric memory whose loads take (virtual) time; it sets ``prices_loads = True``."""

    def begin(self, schedule, label: str = "") -> None:
        """``schedule`` starts on this rank as loads and stores."""
        ...

    def loads(self, r: int, reads) -> None:
        """This rank has read ``nbytes`` from each peer of ``reads`` (``(src, nbytes)`` pairs) in round
        ``r``: return when those bytes would have arrived."""
        ...


def capabilities(transport) -> Capabilities:
    """What ``transport`` declares (a ``TransportBase`` subclass overrides ``capabilities``)."""
    return transport.capabilities
