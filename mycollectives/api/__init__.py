"""The collectives API: torch.distributed's names and argument order (chapter 2).

Each module holds one family of calls; :mod:`.core` is what every call does
before its schedule runs (check, agree, choose, build). This package is the
namespace the bench hands to a collective's record to call it, beside
``torch.distributed`` itself: a new collective's API function is imported
here (and in the package's ``__init__``) by name, as every one above.
"""

from __future__ import annotations

from ..ops import ReduceOp
from .all_to_all import all_to_all, all_to_all_single
from .barrier import barrier
from .broadcast import broadcast
from .gather import all_gather, all_gather_into_tensor, all_gather_single, gather, scatter
from .group import get_rank, get_world_size
from .p2p import irecv, isend, recv, send
from .reduce import all_reduce, reduce
from .reduce_scatter import reduce_scatter, reduce_scatter_single, reduce_scatter_tensor
from .work import Work

__all__ = [
    "ReduceOp",
    "all_gather",
    "all_gather_into_tensor",
    "all_gather_single",
    "all_reduce",
    "all_to_all",
    "all_to_all_single",
    "barrier",
    "broadcast",
    "gather",
    "get_rank",
    "get_world_size",
    "irecv",
    "isend",
    "recv",
    "reduce",
    "reduce_scatter",
    "reduce_scatter_single",
    "reduce_scatter_tensor",
    "scatter",
    "send",
    "Work",
]
