"""What a transport declares it can do (:class:`Capabilities`), read by the
executor, the load/store path and the API instead of probing objects.

Every transport has a ``capabilities`` attribute (``TransportBase``'s
default: it moves messages, and its ranks can share a heap of symmetric
memory when they are processes rather than the threads of a local world). A transport that can hand a received message over where it lies
(shared memory) declares ``read_in_place`` and offers :class:`ReadsInPlace`'s
two methods: the executor then reduces straight from there, with no copy.
One whose ranks share an address space and keep a heap of symmetric memory
themselves (the virtual cluster's threads) declares ``heap_loads`` and
``hosts_heap`` and offers :class:`HostsHeap`'s ``join_heap``, the
rendezvous. One that declares ``channels_apart`` (the virtual cluster) has
each strand of a call's channels run at its own pace (:class:`RunsChannelsApart`). Its handles may declare ``prices_loads`` and offer
:class:`PricesLoads`, which the load/store path tells what each round reads.
One that declares ``strided_messages`` (the virtual cluster) sends and
receives a tensor of any strides, so the executor hands it a message of
several equal, evenly spaced pieces as one strided view, with no packing copy.
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
    hosts_heap: bool = False  # offers join_heap() (HostsHeap): its own rendezvous of symmetric memory
    channels_apart: bool = False  # runs a call's strands of channels apart (RunsChannelsApart)
    strided_messages: bool = False  # takes a message of equal, evenly spaced pieces as one strided view


class ReadsInPlace(Protocol):
    """A transport whose received messages can be read where they lie."""

    def held(self, work, timeout: float | None = None) -> torch.Tensor | None:
        """The message ``work`` receives, where it lies (waiting for it), or
        None where this message is not held so (then ``work.wait()`` as usual)."""
        ...

    def release(self, work) -> None:
        """Done reading what :meth:`held` returned: the sender may reuse the space."""
        ...


class HostsHeap(Protocol):
    """A transport that rendezvouses symmetric memory itself (its ranks share one address space)."""

    def join_heap(self, block, control: bool = False):
        """The handle of ``block`` (a :class:`~mycollectives.symmetric.heap.Block`, None where this
        rank's tensor is outside the heap) mapped on every rank of the group; collective. ``control``:
        the group's control block (the argument check's). Raises ``ValueError`` on every rank alike."""
        ...


class RunsChannelsApart(Protocol):
    """A transport on which the executor runs each strand of a call's channels (``plan.strands``) at
    its own pace, as NCCL's channels run: ``exchange`` keeps each strand's messages apart (a round's
    :class:`~mycollectives.transport.message.Label` names its strand), and :meth:`wait_any` says which
    strand may go on. Others run a call's channels round by round together."""

    def wait_any(self, works: list, timeout: float | None = None) -> int:
        """The index of one of ``works`` that is complete (waiting until one is)."""
        ...


class PricesLoads(Protocol):
    """A handle of symmetric memory whose loads take (virtual) time; it sets ``prices_loads = True``."""

    def loads(self, r: int, reads) -> None:
        """This rank has read ``nbytes`` from each peer of ``reads`` (``(src, nbytes)`` pairs) in round
        ``r``: return when those bytes would have arrived (round 0 starts a call)."""
        ...


def capabilities(transport) -> Capabilities:
    """What ``transport`` declares (a ``TransportBase`` subclass overrides ``capabilities``)."""
    return transport.capabilities
