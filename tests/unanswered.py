"""The shared assertion of the exercise tests: a check given a placeholder says
"not answered yet", checks nothing and prints no success line."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable


def assert_not_answered(check: Callable, *args, **kwargs) -> str:
    """Run ``check(*args, **kwargs)``: it must return quietly with "not answered yet"."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        check(*args, **kwargs)
    text = out.getvalue()
    assert "not answered yet" in text and "Correct" not in text, text
    return text
