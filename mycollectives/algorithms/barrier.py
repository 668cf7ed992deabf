"""Barrier: no rank leaves before every rank has arrived.

Buffer layout: a one-element token in ``WORK``; what it holds does not matter,
only that messages carrying it have arrived.
"""

from __future__ import annotations

import numpy as np

from ..schedule import TMP, Round, ceil_log2
from .registry import Spec, register


@register("barrier", "dissemination")
def dissemination(spec: Spec) -> list[Round]:
    """Hensgen, Finkel and Manber (1988): in round ``k`` rank ``r`` signals ``r + 2**k``.

    After round ``k`` each rank has heard, directly or through others, from
    the ``2**(k+1) - 1`` ranks before it: ``ceil(log2 p)`` rounds for any ``p``.
    """
    p = spec.world_size
    r = np.arange(p)
    return [Round.of(r, (r + (1 << k)) % p, 0, 1, dbuf=TMP, doff=0) for k in range(ceil_log2(p))]
