"""What every check shares: ask for the answer, compare it, and say what was
right only once every part of the exercise is, without ever giving the
expected value away.

A reader's answer cell starts with a placeholder: ``None`` for a value, a
function whose body raises ``NotImplementedError`` for code. A check
decorated with :func:`exercise` prints ``not answered yet`` while any part
still holds its placeholder, and reveals nothing else. A wrong answer raises
``AssertionError`` with a message that says what is wrong (naming the likely
mistake where one is typical) and how far off it is in coarse bands (never
the exact ratio, from which the expected value could be worked back). A right
one prints one line per part; checks of several parts collect their lines
with :func:`passed` and print them at the end, so that no success is printed
before a failure.
"""

from __future__ import annotations

import functools
import math
import textwrap
from collections.abc import Callable
from typing import Any, TypeVar

_F = TypeVar("_F", bound=Callable[..., Any])

NOT_ANSWERED = "not answered yet"


class NotAnswered(AssertionError):
    """An answer still holds its placeholder (``None``, or code that raises
    ``NotImplementedError``)."""


def unanswered(answer: object) -> bool:
    """``answer`` is a placeholder: ``None`` or ``...``."""
    return answer is None or answer is Ellipsis


def need(answer: object, what: str) -> None:
    """Stop the check (``not answered yet``) while ``answer`` is a placeholder."""
    if unanswered(answer):
        raise NotAnswered(f"{NOT_ANSWERED} (replace None with your answer: {what})")


def _placeholder_in(e: BaseException | None) -> BaseException | None:
    """The :class:`NotAnswered` or ``NotImplementedError`` behind ``e``, if any."""
    seen = set()
    while e is not None and id(e) not in seen:
        if isinstance(e, NotAnswered | NotImplementedError):
            return e
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return None


def exercise(check: _F) -> _F:
    """Decorate a check: while an answer holds its placeholder, print
    ``not answered yet`` (naming what to set) and return ``None`` instead of
    checking anything; every other outcome is the check's own."""

    @functools.wraps(check)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return check(*args, **kwargs)
        except AssertionError as e:
            found = _placeholder_in(e)
            if found is None:
                raise
            message = (
                str(found)
                if isinstance(found, NotAnswered)
                else f"{NOT_ANSWERED} (your code raises NotImplementedError)"
            )
            print(textwrap.shorten(message, 78, placeholder=" ...)"))  # one line, at the column
            return None
        except NotImplementedError:
            print(f"{NOT_ANSWERED} (your code raises NotImplementedError)")
            return None

    return run  # type: ignore[return-value]


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


_BANDS = ((1.1, "by less than 10 %"), (1.5, "by 10 to 50 %"), (2.0, "by 50 % to 2x"), (10.0, "by 2x to 10x"))


def off(got: float, want: float) -> str:
    """How far ``got`` is from ``want``, in coarse words that do not give ``want``
    away: ``off by 10 to 50 % (too high)``."""
    if not want or not got or (got > 0) != (want > 0):
        return "off: wrong sign or zero" if got != want else "right"
    ratio = got / want
    side = "too high" if ratio > 1 else "too low"
    r = max(ratio, 1 / ratio)
    band = next((words for limit, words in _BANDS if r < limit), "by more than 10x")
    return f"off {band} ({side})"


def expect(answer: object, want: float, what: str, rel: float = 0.01, hint: str = "") -> str:
    """Check a number; return the success line (printed by the caller)."""
    got = number(answer, what)
    assert near(got, want, rel), f"{what}: got {got:.4g}, {off(got, want)}" + (f"; {hint}" if hint else "")
    return f"Correct: {what}"


def passed(*lines: str) -> None:
    """Print the success lines of every part, once all of them have passed."""
    print("\n".join(lines))


def close(answer: object, want: float, what: str, unit: str = "", rel: float = 0.02) -> None:
    """Pass quietly if ``answer`` is within ``rel`` of ``want``; else say in coarse
    bands how far it is off (never the expected value)."""
    got = number(answer, what)
    assert near(got, want, rel), f"{what}: got {got:.4g}{unit}, {off(got, want)}"


def correct(answer: object, want: float, what: str, unit: str = "", rel: float = 0.02) -> None:
    """:func:`close`, then print the success line (a check of one part)."""
    close(answer, want, what, unit, rel)
    print(f"Correct: {what}")
