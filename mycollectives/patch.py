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
        train()  # DDP comm hooks, FSDP2, tensor parallel layers: all on mycollectives
    finally:
        undo()
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

from . import api
from .collectives import FUNCTIONS  # every API function that runs a collective, from the records

_saved: list[tuple[object, str, object]] = []


def patch_torch_distributed(
    names: Sequence[str] = FUNCTIONS, algorithm: str = "auto", **options
) -> Callable[[], None]:
    """Replace torch.distributed's collectives ``names`` by the package's; returns the undo.

    ``algorithm`` and ``options`` (``check``, ``timeout``, ``segment_bytes``,
    ``local_size``) apply to every patched call. Patching twice without undoing
    first is refused: the undo must restore torch's own functions.
    """
    import torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d

    if _saved:
        raise RuntimeError("torch.distributed is already patched; call the undo it returned first")
    unknown = [n for n in names if n not in FUNCTIONS]
    if unknown:
        raise ValueError(
            f"names: {unknown} are not collectives this package provides; expected some of {FUNCTIONS}"
        )
    for name in names:
        ours = functools.wraps(getattr(api, name))(
            functools.partial(getattr(api, name), algorithm=algorithm, **options)
        )
        for module in (dist, c10d):
            if hasattr(module, name):
                _saved.append((module, name, getattr(module, name)))
                setattr(module, name, ours)
    return unpatch_torch_distributed


def unpatch_torch_distributed() -> None:
    """Put torch.distributed's own collectives back (nothing to do if unpatched)."""
    while _saved:
        module, name, original = _saved.pop()
        setattr(module, name, original)
