"""``algorithm="auto"``: the algorithm the cost model finds fastest (chapter 3b).

Like NCCL's tuner, which times every algorithm and protocol as
``latency + bytes / bandwidth`` and takes the minimum, :func:`choose` counts
the alpha-beta-gamma time of every algorithm on the menu from its schedule
(:func:`mycollectives.cost.predict`) and returns the cheapest: a newly
registered algorithm is a candidate at once, formula or not. Above 64 ranks
an algorithm with a closed form is ranked by it instead (microseconds, where
building the schedules of a call on thousands of ranks takes seconds to
minutes), and above 256 ranks one without a closed form is left out of the
choice (:func:`mycollectives.cost.left_out` names it; it still runs when
named); up to 64 ranks the two rankings pick the same algorithm
(``tests/test_auto_scale.py``; on sizes no ``p`` divides, a closed form
charges the largest chunk and its pick is within 0.1 % of the counted best).
The answer depends only on its arguments, so every rank picks the same
algorithm.

An algorithm that needs the node size (``hierarchical``) is considered only
when ``local_size`` is given (the call's ``local_size=``, or torchrun's
``LOCAL_WORLD_SIZE``) and divides the world size; a load/store
algorithm (the one-shot all-reduce) only for tensors in symmetric memory
(``heap``), ranked with :data:`LOADSTORE`'s costs.

The answer is cached per call shape: ranking the menu builds a schedule per
algorithm, which a small collective would otherwise pay on every call.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from .cost import DEFAULT_MACHINE, Machine, cheapest

# Load/store on one host's shared memory (symmetric memory): a round costs a
# barrier on the signal pads (about 10 us between two processes that are
# running; benchmarks/vs_mpi.py measures it), however many peers a rank reads,
# and bytes are loaded and added at one core's memory speed (about 6 GB/s
# here). Used by ``auto`` for tensors in symmetric memory: it picks the
# direct algorithms (one round of reads) or two-shot, as NCCL's and PyTorch's
# symmetric-memory kernels do.
LOADSTORE = Machine(alpha=10e-6, beta=1.5e-10, gamma=1.5e-10, loads=True)


@functools.lru_cache(maxsize=4096)
def choose(
    collective: str,
    world_size: int,
    nbytes: int,
    machine: Machine | None = None,
    local_size: int | None = None,
    itemsize: int = 4,
    heap: bool = False,
) -> str:
    """The algorithm ``auto`` runs for a call of nccl-tests' ``size`` ``nbytes``.

    >>> choose("all_reduce", 8, 64), choose("all_reduce", 8, 64 << 20)
    ('recursive_doubling', 'rabenseifner')
    >>> choose("all_reduce", 6, 1 << 20), choose("all_reduce", 6, 1 << 20, local_size=3)
    ('ring', 'hierarchical')
    """
    machine = machine or (LOADSTORE if heap else DEFAULT_MACHINE)
    return cheapest(
        collective, world_size, nbytes, machine, itemsize=itemsize, local_size=local_size, heap=heap
    )


# Tuners that answer for their own transports before the cost model does: a virtual run's ranks run
# what NCCL's tuner picks (:mod:`mycollectives.virtual.tuning`). A tuner returns None to pass.
_tuners: list[Callable] = []


def add_tuner(tuner: Callable) -> None:
    """Let ``tuner(collective, transport, nbytes, itemsize=, op=)`` name the algorithm ``auto`` runs
    on the transports it knows (None elsewhere): how a virtual run puts NCCL's choice in."""
    if tuner not in _tuners:
        _tuners.append(tuner)


def resolve(
    collective: str,
    transport,
    nbytes: int,
    *,
    itemsize: int = 4,
    heap: bool = False,
    local_size: int | None = None,
    op: str | None = None,
) -> str:
    """The algorithm ``auto`` means for this call on ``transport``: a tuner's answer (not for
    tensors in symmetric memory, which run as loads), else :func:`choose`'s."""
    for tuner in () if heap else _tuners:
        name = tuner(collective, transport, nbytes, itemsize=itemsize, op=op)
        if name is not None:
            return name
    return choose(
        collective, transport.world_size, nbytes, itemsize=itemsize, heap=heap, local_size=local_size
    )
