"""mycollectives: every collective of deep learning, built from send/recv upward.

The API mirrors ``torch.distributed`` (same names, same argument order), plus
``algorithm=`` to choose how a collective runs::

    import mycollectives as mc
    mc.all_reduce(tensor, op=mc.ReduceOp.SUM, algorithm="ring")
    mc.algorithms("all_reduce")   # the menu
    mc.run_local(fn, 4)           # fn(rank) on 4 ranks in this process
    mc.run_gloo(fn, 4)            # ... or on 4 gloo processes

``group`` is a torch process group (gloo, NCCL, ...), a transport, or None:
the enclosing local world, else torch's default group. Layers, bottom up
(``mycollectives.book.layers`` lists them, and a test holds every import to them):
``schedule`` (rounds of transfers), ``transport`` (moves bytes),
``collectives`` (what each collective is: one record each), ``algorithms``
(the menu of schedule builders), ``verify``, ``plan``, ``executor`` and
``cost`` (consumers of schedules), ``auto``, and the API in ``api``. Above
the API: ``pingpong`` (calibration), ``sim``, ``viz``, ``bench``,
``exercises``, ``memory``.
"""

from __future__ import annotations

from .algorithms import algorithms
from .api import (
    all_gather,
    all_gather_into_tensor,
    all_gather_single,
    all_reduce,
    all_to_all,
    all_to_all_single,
    barrier,
    broadcast,
    gather,
    get_rank,
    get_world_size,
    irecv,
    isend,
    recv,
    reduce,
    reduce_scatter,
    reduce_scatter_single,
    reduce_scatter_tensor,
    scatter,
    send,
)
from .api.work import Work
from .errors import CollectiveError, CollectiveTimeout, DeadlockError, PeerError
from .ops import ReduceOp
from .patch import patch_torch_distributed, unpatch_torch_distributed
from .pingpong import calibrate
from .transport import LocalWorld, run_local
from .transport.launcher import GlooPool, run_gloo
from .verify import VerificationError, verify

__version__ = "0.1.0"

__all__ = [
    "ReduceOp",
    "algorithms",
    "run_local",
    "run_gloo",
    "GlooPool",
    "LocalWorld",
    "calibrate",
    "patch_torch_distributed",
    "unpatch_torch_distributed",
    "Work",
    "get_rank",
    "get_world_size",
    "send",
    "recv",
    "isend",
    "irecv",
    "broadcast",
    "reduce",
    "all_reduce",
    "all_gather",
    "all_gather_into_tensor",
    "all_gather_single",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "reduce_scatter_single",
    "scatter",
    "gather",
    "all_to_all",
    "all_to_all_single",
    "barrier",
    "verify",
    "VerificationError",
    "CollectiveError",
    "CollectiveTimeout",
    "PeerError",
    "DeadlockError",
]
