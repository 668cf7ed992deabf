"""mycollectives: every collective of deep learning, built from send/recv upward.

The API mirrors ``torch.distributed`` (same names, same argument order), plus
``algorithm=`` to choose how a collective runs::

    import mycollectives as mc
    mc.all_reduce(tensor, op=mc.ReduceOp.SUM, algorithm="ring")
    mc.algorithms("all_reduce")   # the menu
    mc.run_local(fn, 4)           # fn(rank) on 4 ranks in this process

``group`` is a torch process group (gloo, NCCL, ...), a transport, or None:
the enclosing local world, else torch's default group. Layers, bottom up:
``transport`` (moves bytes), ``schedule`` and ``algorithms`` (algorithms as
data), ``executor`` (runs one rank's part), and the API in ``api``. Beside
them ``verify`` proves a schedule correct by symbolic execution.
"""

from __future__ import annotations

from .algorithms import algorithms
from .api.all_to_all import all_to_all, all_to_all_single
from .api.barrier import barrier
from .api.broadcast import broadcast
from .api.gather import all_gather, all_gather_into_tensor, gather, scatter
from .api.group import get_rank, get_world_size
from .api.p2p import irecv, isend, recv, send
from .api.reduce import all_reduce, reduce
from .api.reduce_scatter import reduce_scatter, reduce_scatter_tensor
from .errors import CollectiveError, CollectiveTimeout, DeadlockError, PeerError
from .ops import ReduceOp
from .transport import LocalWorld, run_local
from .verify import VerificationError, verify

__version__ = "0.1.0"

__all__ = [
    "ReduceOp",
    "algorithms",
    "run_local",
    "LocalWorld",
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
    "reduce_scatter",
    "reduce_scatter_tensor",
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
