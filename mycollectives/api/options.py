"""The options every collective takes beside torch.distributed's arguments, parsed and checked."""

from __future__ import annotations

import datetime
import math
import numbers
from dataclasses import dataclass

from ..algorithms import channels as _channels

_OPTIONS = ("timeout", "check", "segment_bytes", "local_size", "channels")


@dataclass
class Options:
    timeout: float | None = None
    check: bool = True
    segment_bytes: int | None = None
    local_size: int | None = None
    channels: int | None = None  # NCCL's channels (algorithms/channels.py); None: the transport's default

    @classmethod
    def parse(cls, fn: str, options: dict) -> tuple[Options, Exception | None]:
        """The options, and the first problem with them (the defaults stand in for a bad one)."""
        out, problem = cls(), None
        for k, v in options.items():
            try:
                setattr(out, k, _option(fn, k, v))
            except (ValueError, TypeError) as e:
                problem = problem or e
        return out, problem


def _option(fn: str, name: str, value):
    if name not in _OPTIONS:
        raise TypeError(f"{fn}() got an unexpected keyword argument {name!r}; options are {_OPTIONS}")
    if value is None:
        return True if name == "check" else None
    if name == "check":
        if not isinstance(value, bool):
            raise TypeError(f"argument 'check' must be True or False, got {value!r}")
        return value
    if name == "channels":  # any bad value is a ValueError naming it (issue 37)
        return _channels.check(value)
    if name == "timeout" and isinstance(value, datetime.timedelta):
        value = value.total_seconds()
    real = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if name == "timeout":
        if not real or not math.isfinite(value) or value <= 0:
            raise (ValueError if real else TypeError)(
                f"argument 'timeout' must be a positive, finite number of seconds, got {value!r}"
            )
        return float(value)
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 1:
        raise (ValueError if real else TypeError)(f"argument '{name}' must be a positive int, got {value!r}")
    return int(value)
