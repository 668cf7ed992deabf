"""PAT, Parallel Aggregated Trees: NCCL's all-gather and reduce-scatter at scale.

Jeaugey (2025, ``jeaugey2025pat``), in NCCL since 2.23 (the schedule classes
``PatAGAlgorithm`` and ``PatRSAlgorithm`` of ``src/include/collectives.h``,
``nccl_pat_schedule``). Chapter 3, "PAT: Bruck reversed, for many nodes".

**The all-gather, in words.** Think of the ``p`` ranks on a circle. Block
``q`` (rank ``q``'s input) spreads along a binomial tree rooted at ``q``
whose edges point to *lower* ranks and get *shorter* as they go: first the
longest hop, ``2^(D-1)`` back (``D = ceil(log2 p)``), then half that, down to
a hop of one. With ``p = 8``, block 0 goes 0 -> 4, then 0 -> 6 and 4 -> 2,
then every holder hands it one rank back: 0 -> 7, 6 -> 5, 4 -> 3, 2 -> 1.
All ``p`` trees run at once, one a rotation of the other, so in the step of
distance ``2^d`` every rank does the same thing: it sends to the rank
``2^d`` behind it every block it holds at an offset ``o`` (counted forward
from itself) that is a multiple of ``2^(d+1)``, as long as the receiver
does not already hold it (``o + 2^d <= p - 1``). After that step each rank
holds the blocks at every multiple of ``2^d``; after the step of distance 1,
all of them.

That is Bruck's all-gather with its distances reversed: Bruck starts with
the nearest neighbour and ends sending half the data to the farthest rank;
PAT sends one block the farthest way first and half the data to its
nearest neighbour last. On a fabric where "near" ranks share a switch,
PAT's big steps stay on the cheap links.

**Aggregation.** A step of distance ``2^d`` is a message of up to ``p/2``
blocks. NCCL sends messages through fixed buffer slots (512 KiB by
default), so it packs at most ``A`` blocks into one message, ``A`` the
largest power of two with ``A * block <= slot``, at least 1 and no more
than the step of distance 1 needs (its ``aggFactor`` / ``postFreq``): small blocks give ``ceil(log2 p)`` messages, the Bruck
count; blocks larger than half a slot give one block per message, ``p-1``
messages, the ring's count. Here the slot is the schedule's ``segment``,
and the schedule is one channel: NCCL first cuts every block across its
channels, so it counts blocks per message with each channel's share.
NCCL also orders its steps by groups of ``aggFactor`` blocks, depth-first
within its pipeline (``NCCL_STEPS`` slots), so that a forwarded block
leaves from the slot it arrived in (its "logarithmic buffers"); in rounds,
where every step has finished before the next starts, that order changes
neither what is sent nor its cost, so the schedule keeps PAT's far-to-near
order. Its message count is NCCL's for a power-of-two ``p`` and the same
slot only: NCCL sizes the chunk per call (halving it, down to 64 KiB, while
a channel's share holds few chunks, ``calcCollChunking`` in
``src/enqueue.cc``), and for other ``p`` it groups blocks over padded
indices and sends more messages. Chapter 3 counts both.

**The reduce-scatter** is the all-gather run backwards
(:func:`~mycollectives.schedule.mirror`):
near to far, rank ``r`` sends to ``r + 2^d`` the partial sums of the blocks
at offsets ``u`` with lowest set bit ``2^d``, each its own input plus what
arrived for that block on the shorter distances before. NCCL's
``PatRSAlgorithm`` sends the same blocks on the same distances; it groups a
distance's blocks into messages in another order.
"""

from __future__ import annotations

import numpy as np

from ..schedule import Round, ceil_log2, mirror
from .registry import DEFAULT_SEGMENT_BYTES, Spec, register


def aggregation(p: int, block: int, slot: int) -> int:
    """Blocks per message, from the size alone: what NCCL keeps as ``postFreq``.

    Doubles while two blocks per current factor still fit in a slot and the
    factor is below ``p // 2``: the first loop of ``PatAGAlgorithm``'s
    constructor (NCCL 2.30.7, ``src/include/collectives.h``), whose
    result NCCL stores as ``postFreq``. NCCL's ``aggFactor`` goes on doubling
    with the pipeline depth (``stepDepth``), which this model does not have.

    >>> aggregation(16, 1, 512), aggregation(16, 100, 512), aggregation(16, 1000, 512)
    (8, 4, 1)
    """
    a = 1
    while 2 * a * block <= slot and a < p // 2:
        a *= 2
    return a


def offsets_at(p: int, d: int) -> np.ndarray:
    """Offsets (forward from the sender) of the blocks sent in the step of distance ``2^d``.

    >>> offsets_at(8, 2).tolist(), offsets_at(8, 1).tolist(), offsets_at(8, 0).tolist()
    ([0], [0, 4], [0, 2, 4, 6])
    """
    return np.arange(0, p - (1 << d), 2 << d)


def pat_all_gather(p: int, n: int, per_message: int) -> list[Round]:
    """Far to near: for ``d = D-1 .. 0`` every rank ``r`` sends to ``r - 2^d``
    its blocks at offsets ``offsets_at(p, d)``, ``per_message`` at a time.

    Block ``q`` lives at ``q * n`` in every rank's buffer (blocks of ``n``
    elements); one round is one message per rank.
    """
    r = np.arange(p)[:, None]
    rounds = []
    for d in reversed(range(ceil_log2(p))):
        offsets = offsets_at(p, d)
        for i in range(0, len(offsets), per_message):
            blocks = (r + offsets[None, i : i + per_message]) % p  # (rank, block)
            rounds.append(Round.of(r, (r - (1 << d)) % p, blocks * n, n))
    return rounds


def _per_message(spec: Spec) -> int:
    slot = spec.segment or DEFAULT_SEGMENT_BYTES // 4
    return aggregation(spec.world_size, spec.count, slot)


@register("all_gather", "pat", uses=("segment",))
def pat(spec: Spec) -> list[Round]:
    return pat_all_gather(spec.world_size, spec.count, _per_message(spec))


@register("reduce_scatter", "pat", uses=("segment",))
def pat_reduce_scatter(spec: Spec) -> list[Round]:
    return mirror(pat_all_gather(spec.world_size, spec.count, _per_message(spec)), reduce=True)
