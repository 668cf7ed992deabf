"""The menu of algorithms, one builder each (chapter 3).

:mod:`.registry` holds the menu and the one way from a call to a schedule
(:func:`schedule_for`); each module beside it registers one family of
builders; a new module dropped into this folder is imported too (after
these, in name order), so that adding an algorithm is adding one file. What a
collective's buffers hold before and after every algorithm is its record's,
in :mod:`mycollectives.collectives`.
"""

from __future__ import annotations

from ..collectives import ALIASES, Spec, canonical, collectives

# importing the modules registers their algorithms, in menu order
from . import (  # noqa: E402,F401,I001
    all_gather,
    all_reduce,
    all_to_all,
    barrier,
    broadcast,
    channels,
    hierarchical,
    pat,
    reduce,
    reduce_scatter,
    scatter_gather,
    trees,
)
from .registry import (  # noqa: I001
    DEFAULT_SEGMENT_BYTES,
    Builder,
    algorithms,
    build,
    discover,
    entry,
    register,
    schedule_for,
    spec_for,
    unregister,
    uses,
)

discover(__name__, __path__)  # a module added beside these registers its algorithms too, after them


def __getattr__(name: str):
    """``COLLECTIVES``, read now from the records (a copy taken at import would miss one added later)."""
    if name == "COLLECTIVES":
        return collectives()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ALIASES",
    "COLLECTIVES",
    "DEFAULT_SEGMENT_BYTES",
    "Builder",
    "Spec",
    "algorithms",
    "build",
    "canonical",
    "entry",
    "register",
    "schedule_for",
    "spec_for",
    "unregister",
    "uses",
]
