"""Helpers the numeric checkers share: an answer is given, and it is close enough.

Neither prints the expected value: a wrong answer is told by how far off it
is, so that the check cell does not give the answer away.
"""

from __future__ import annotations

import math


def need(answer: object, what: str) -> None:
    """Fail, saying what to set, while the answer cell still holds None."""
    assert answer is not None, f"replace None with your answer: {what}"


def close(answer: float | None, want: float, what: str, unit: str = "", rel: float = 0.02) -> None:
    """Pass quietly if ``answer`` is within ``rel`` of ``want``; else say by how much it is off."""
    need(answer, what)
    got = float(answer)
    assert math.isclose(got, want, rel_tol=rel), (
        f"{what}: got {got:.4g}{unit}, which is off by {100 * (got / want - 1):+.1f}% from the expected value"
    )


__all__ = ["close", "need"]
