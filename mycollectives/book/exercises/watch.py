"""Which of the package's own answers a reader's function called.

Some exercises ask the reader to compute what a library function computes
(a schedule, NCCL's protocol choice); calling that function passes any check
of the result. :func:`library_calls` runs the reader's function once under a
profiler and names the forbidden functions it entered, however it reached
them (by name, through an alias, or through another library function).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from types import CodeType


def library_calls(
    fn: Callable, args: tuple, forbidden: Iterable[Callable | CodeType] | Callable[[CodeType], bool]
) -> list[str]:
    """Run ``fn(*args)`` once (its errors are left to the check) and return the names of the
    forbidden functions it entered: ``forbidden`` is a set of functions, or a test on a code object."""
    if callable(forbidden) and not isinstance(forbidden, Iterable):
        is_forbidden = forbidden
    else:
        codes = {getattr(getattr(f, "__wrapped__", f), "__code__", f) for f in forbidden}
        is_forbidden = codes.__contains__
    called: list[str] = []

    def watch(frame, event, arg):
        if event == "call" and is_forbidden(frame.f_code):
            called.append(frame.f_code.co_qualname)

    previous = sys.getprofile()
    sys.setprofile(watch)
    try:
        fn(*args)
    except Exception:  # noqa: BLE001, S110 - the check that follows reports what is wrong with it
        pass
    finally:
        sys.setprofile(previous)
    return list(dict.fromkeys(called))


__all__ = ["library_calls"]
