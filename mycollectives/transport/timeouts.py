"""How long a transport waits: ``MYCOLLECTIVES_TIMEOUT``, read and checked."""

from __future__ import annotations

import math
import os

TIMEOUT_ENV = "MYCOLLECTIVES_TIMEOUT"


def env_timeout(default: float) -> float:
    """``MYCOLLECTIVES_TIMEOUT`` in seconds (``default`` where unset or empty),
    refused with an error naming it unless a positive, finite number."""
    raw = os.environ.get(TIMEOUT_ENV, "").strip()
    if not raw:
        return float(default)
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{TIMEOUT_ENV}={raw!r}: expected a positive, finite number of seconds")
    return value
