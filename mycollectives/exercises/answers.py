"""What every numeric check shares: ask for the answer, compare it, and say
what was right only once every part of the exercise is.

A check computes the expected value from the package, raises
``AssertionError`` with a message that says what is wrong (naming the
likely mistake where one is typical), and otherwise prints one line per
part. Checks of several parts collect their lines with :func:`passed` and
print them at the end, so that no success is printed before a failure.
"""

from __future__ import annotations

import math


def need(answer: object, what: str) -> None:
    """Fail with "replace None" while the answer cell still holds ``None``."""
    assert answer is not None, f"replace None with your answer: {what}"


def number(answer: object, what: str) -> float:
    """The answer as a float, or a failure that says a number was expected."""
    need(answer, what)
    try:
        return float(answer)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise AssertionError(f"{what}: expected a number, got {answer!r}") from None


def near(got: float, want: float, rel: float) -> bool:
    """``got`` within ``rel`` (a fraction) of ``want``."""
    return math.isclose(got, want, rel_tol=rel, abs_tol=0.0 if want else rel)


def off(got: float, want: float) -> str:
    """How far ``got`` is from ``want``, in words: ``+3 %`` or ``a factor 8``."""
    if not want or not got:
        return "wrong"
    ratio = got / want
    if 0.5 < ratio < 2:
        return f"off by {100 * (ratio - 1):+.1f} %"
    return f"off by a factor {ratio:.3g}"


def expect(answer: object, want: float, what: str, rel: float = 0.01, hint: str = "") -> str:
    """Check a number; return the success line (printed by the caller)."""
    got = number(answer, what)
    assert near(got, want, rel), f"{what}: got {got:.4g}, {off(got, want)}" + (f"; {hint}" if hint else "")
    return f"Correct: {what} = {got:.4g}"


def passed(*lines: str) -> None:
    """Print the success lines of every part, once all of them have passed."""
    print("\n".join(lines))


def close(answer: object, want: float, what: str, unit: str = "", rel: float = 0.02) -> None:
    """Pass quietly if ``answer`` is within ``rel`` of ``want``; else say by how much it is off
    (never printing the expected value, so the check cell does not give the answer away)."""
    got = number(answer, what)
    assert near(got, want, rel), f"{what}: got {got:.4g}{unit}, {off(got, want)} from the expected value"


def correct(answer: object, want: float, what: str, unit: str = "", rel: float = 0.02) -> None:
    """:func:`close`, then print the success line (a check of one part)."""
    close(answer, want, what, unit, rel)
    print(f"Correct: {what} = {float(answer):.4g}{unit}")  # type: ignore[arg-type]
