"""Putting the package under an existing program: :func:`~mycollectives.patch_torch_distributed`.

The collectives keep torch.distributed's names, argument order and
semantics, so a training program written for ``torch.distributed`` can run
on this package's algorithms unchanged: patch the module's functions, run the
program, undo. Code that calls ``dist.all_reduce(...)`` (or
``torch.distributed.distributed_c10d.all_reduce``) after the patch calls the
package; a name bound before it (``from torch.distributed import
all_reduce``) keeps torch's. The package itself never calls the public
collectives it replaces (its transports use the process group's own
point-to-point calls), so a patched program cannot recurse into it::

    undo = mc.patch_torch_distributed(algorithm="ring")
    try:
        train()  # DDP and its comm hooks, FSDP2, hand-written tensor parallelism: on mycollectives
    finally:
        undo()

What the patch covers: the functions of ``torch.distributed`` listed in
``COLLECTIVES``, called through the module. What it does not: torch's
*functional* collectives (``torch.distributed._functional_collectives``
and the ``torch.ops._c10d_functional`` operators under them), which DTensor
(``parallelize_module`` with ``ColwiseParallel``/``RowwiseParallel``,
``distribute_tensor``) and ``torch.compile`` call without going through
``dist.*``; those run torch's own collectives, on the process group's
backend. The patch does not pretend otherwise: while it is in place, the
first call of each functional collective warns with ``NotRouted``
(and still runs torch's), so a program can see which of its collectives the
package did not run (``warnings.simplefilter("error", NotRouted)`` makes it
an error).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

from . import api
from .collectives import functions  # every API function that runs a collective, from the records

# torch's functional collectives (DTensor's, torch.compile's): not routed, but announced (see the module)
FUNCTIONAL = (
    "all_reduce",
    "all_reduce_coalesced",
    "all_gather_tensor",
    "all_gather_tensor_autograd",
    "all_gather_into_tensor_coalesced",
    "reduce_scatter_tensor",
    "reduce_scatter_tensor_autograd",
    "reduce_scatter_tensor_coalesced",
    "all_to_all_single",
    "all_to_all_single_autograd",
    "broadcast",
    "permute_tensor",
)

_saved: list[tuple[object, str, object]] = []


class NotRouted(UserWarning):
    """A collective that ``patch_torch_distributed`` does not route to the
    package ran torch's own (a functional collective: DTensor, torch.compile)."""


def _announced(module, name: str, original: Callable) -> Callable:
    """``original``, warning with ``NotRouted`` the first time it runs."""
    said = []

    @functools.wraps(original)
    def call(*args, **kwargs):
        if not said:
            said.append(True)
            import warnings

            warnings.warn(
                f"{module.__name__}.{name} (DTensor's and torch.compile's functional collectives) is not "
                "routed by mycollectives.patch_torch_distributed: this call runs torch's own collective",
                NotRouted,
                stacklevel=2,
            )
        return original(*args, **kwargs)

    return call


def patch_torch_distributed(
    names: Sequence[str] | None = None, algorithm: str = "auto", **options
) -> Callable[[], None]:
    """Replace torch.distributed's collectives ``names`` (None: every one) by the package's; returns the undo.

    ``algorithm`` and ``options`` (``check``, ``timeout``, ``segment_bytes``,
    ``local_size``) apply to every patched call. Patching twice without undoing
    first is refused: the undo must restore torch's own functions.
    """
    import torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d

    if _saved:
        raise RuntimeError("torch.distributed is already patched; call the undo it returned first")
    ours = functions()
    names = ours if names is None else names
    unknown = [n for n in names if n not in ours]
    if unknown:
        raise ValueError(
            f"names: {unknown} are not collectives this package provides; expected some of {ours}"
        )
    for name in names:
        ours = functools.wraps(getattr(api, name))(
            functools.partial(getattr(api, name), algorithm=algorithm, **options)
        )
        for module in (dist, c10d):
            if hasattr(module, name):
                _saved.append((module, name, getattr(module, name)))
                setattr(module, name, ours)
    _announce_functional()
    return unpatch_torch_distributed


def _announce_functional() -> None:
    """Have torch's functional collectives warn that they are not routed (see the module)."""
    try:
        import torch.distributed._functional_collectives as funcol
    except ImportError:  # pragma: no cover - a torch without them
        return
    for name in FUNCTIONAL:
        if hasattr(funcol, name):
            original = getattr(funcol, name)
            _saved.append((funcol, name, original))
            setattr(funcol, name, _announced(funcol, name, original))


def unpatch_torch_distributed() -> None:
    """Put torch.distributed's own collectives back (nothing to do if unpatched)."""
    while _saved:
        module, name, original = _saved.pop()
        setattr(module, name, original)
