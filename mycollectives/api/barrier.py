"""``barrier``: no rank leaves before all have arrived."""

from __future__ import annotations

import torch

from ..schedule import WORK
from .core import Meta, launch


@torch.no_grad()
def barrier(
    group=None, async_op: bool = False, device_ids=None, timeout=None, *, algorithm: str = "auto", **options
):
    """Block until every rank of the group has called ``barrier``.

    ``timeout`` may be seconds or a ``datetime.timedelta``, as in torch;
    ``device_ids`` is accepted for compatibility and ignored.
    """
    if timeout is not None:
        options["timeout"] = timeout.total_seconds() if hasattr(timeout, "total_seconds") else timeout

    def body(job) -> None:
        job.run({WORK: torch.zeros(1, dtype=torch.uint8, device=job.transport.device)})

    return launch("barrier", group, algorithm, options, lambda c, t: Meta(torch.uint8, 1), body, async_op)
