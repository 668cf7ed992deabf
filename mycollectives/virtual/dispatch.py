"""The hot path of the virtual GPU's dispatch modes: what each op is, answered once per op.

Every torch op a rank runs passes through its dispatch mode (``compute.py``):
a rank's compute through :class:`~.compute.Charge`, a collective's own work
through its reductions' mode. A 1 MiB all-reduce runs some 300 of them per
rank (slices, copies, a few additions), so the questions every op asks (its
name, whether it is a view, costs nothing, only moves data, or may skip its
meta kernel in a data-free run) are answered once per op overload and kept
(:func:`kind`). :class:`paused` sets the thread's modes aside with torch's
own stack calls, without ``_disable_current_modes``' general case (modes of
torch.export's pre-dispatch stack, which a virtual run never has; where it
has, that general case runs).
"""

from __future__ import annotations

import threading
from typing import NamedTuple

import torch
from torch._ops import _len_torch_dispatch_stack_pre_dispatch
from torch.utils._python_dispatch import _disable_current_modes

here = threading.local()  # .paused: how deep this thread is in paused()

# Ops that cost nothing: making a tensor's first values (the data's set-up, done once, not a step's work;
# ``from_file`` maps symmetric memory's blocks;
# filling an existing tensor, ``fill_`` or ``zero_``, is a kernel and is charged), and ops that move no data.
FREE_OPS = frozenset(
    "aten::" + name
    for name in (
        "empty empty_like empty_strided ones ones_like zeros zeros_like full full_like rand rand_like randn "
        "randn_like randint randint_like randperm arange linspace eye scalar_tensor lift_fresh detach alias "
        "_local_scalar_dense set_ resize_ from_file"
    ).split()
)

# Ops that run on the host and launch nothing on the GPU: the profiler's markers (``record_function``,
# which DDP's forward opens) are bookkeeping, not kernels.
HOST_NAMESPACES = frozenset({"profiler"})

# Ops that only move data: inside a collective they are the network's work, not a reduction.
MOVES = frozenset("aten::" + n for n in "copy_ clone cat _to_copy contiguous slice narrow".split())


class Kind(NamedTuple):
    name: str  # "aten::add_", the overload's name without its overload
    uncharged: bool  # a view, a free op or a host op: never charged as compute
    no_reduction: bool  # ... or a move: never charged as a collective's reduction
    may_skip: bool  # in a data-free run its result may be had without its meta kernel (``cat``, in place)


_KINDS: dict = {}


def kind(func) -> Kind:
    """What ``func`` (an op overload) is, from its first call on."""
    k = _KINDS.get(func)
    if k is None:
        name = func.name().split(".")[0]
        uncharged = func.is_view or name in FREE_OPS or func.namespace in HOST_NAMESPACES
        k = _KINDS[func] = Kind(
            name, uncharged, uncharged or name in MOVES, name == "aten::cat" or name.endswith("_")
        )
    return k


class paused:  # noqa: N801 - used as a function, ``with paused():``
    """Ops run meanwhile in this thread are not charged (the package's own copies and reductions):
    the thread's dispatch modes are set aside, so those ops also skip the mode's Python overhead."""

    __slots__ = ("_modes", "_general")

    def __enter__(self) -> None:
        here.paused = getattr(here, "paused", 0) + 1
        self._modes, self._general = (), None
        depth = torch._C._len_torch_dispatch_stack()
        if depth == 0:  # a collective's own (its reductions') too: copies are not those
            return
        if _len_torch_dispatch_stack_pre_dispatch() > 0:
            self._general = _disable_current_modes()
            self._general.__enter__()
            return
        self._modes = [torch._C._pop_torch_dispatch_stack(None) for _ in range(depth)]

    def __exit__(self, *exc) -> None:
        try:
            if self._general is not None:
                self._general.__exit__(*exc)
            for mode in reversed(self._modes):
                torch._C._push_on_torch_dispatch_stack(mode)
        finally:
            here.paused -= 1
