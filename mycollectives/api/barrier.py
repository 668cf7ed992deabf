"""``barrier``: no rank leaves before all have arrived."""

from __future__ import annotations

import torch

from ..schedule import WORK
from ..transport import Done
from .core import Meta, launch


def barrier(group=None, async_op: bool = False, *, algorithm: str = "auto", **options):
    """Block until every rank of the group has called ``barrier``."""
    job = launch("barrier", group, algorithm, options, lambda c, t: Meta(torch.uint8, 1))
    job.run({WORK: torch.zeros(1, dtype=torch.uint8, device=job.transport.device)})
    return Done() if async_op else None
