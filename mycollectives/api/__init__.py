"""The collectives API: torch.distributed's names and argument order (chapter 2).

Each module holds one family of calls; :mod:`.core` is what every call does
before its schedule runs (check, agree, choose, build). This package is the
namespace the bench hands to a collective's record to call it, beside
``torch.distributed`` itself.
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


def _export_new_collectives() -> None:
    """Import any module added to this folder, and export every function of a
    collective's record (:data:`~mycollectives.collectives.FUNCTIONS`) that it
    defines: a new collective's API function needs no edit here."""
    import sys

    from ..algorithms.registry import discover
    from ..collectives import FUNCTIONS

    here = sys.modules[__name__]
    for name in discover(__name__, __path__):
        for fn in FUNCTIONS:
            if not callable(getattr(here, fn, None)) and hasattr(sys.modules[name], fn):  # not the module
                setattr(here, fn, getattr(sys.modules[name], fn))
                __all__.append(fn)
    missing = [fn for fn in FUNCTIONS if not callable(getattr(here, fn, None))]
    if missing:
        raise ImportError(f"mycollectives.api defines no function {missing} that a collective's record names")


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

_export_new_collectives()
