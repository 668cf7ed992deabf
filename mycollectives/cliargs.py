"""What the package's command lines and entry points share: numbers checked in one place, and a
parser that refuses nonsense in one line.

:func:`finite` is the one check of a number the package takes from a user
(a flag, an environment variable, an argument of ``virtual.run``): a real
number, not a bool, finite, in range, or a ``TypeError``/``ValueError`` whose
one line names the argument and what was expected. :func:`integer` and
:func:`number` are argparse types built on it.

Every command (``python -m mycollectives.bench``, ``python -m
mycollectives.sim.expect``) refuses a bad flag before doing any work, with
one line on stderr, ``<prog>: error: <flag>: <what was expected>``, and exit
status 2, as argparse does for a flag it cannot parse (argparse itself
prints its usage first; one line is easier to read in a job's log).
"""

from __future__ import annotations

import argparse
import math
import numbers
import os
from collections.abc import Callable

LARGEST = 2**63 - 1  # the largest count or size anything in the package stores (an int64)


def _bounds(least=None, most=None, above=None, integer: bool = False) -> str:
    """What :func:`finite` expects, in words: ``a finite number > 0``."""
    kind = "an integer" if integer else "a finite number"
    low = f"> {above:g}" if above is not None else f">= {least:g}" if least is not None else ""
    high = f"<= {most:g}" if most is not None else ""
    return " ".join(x for x in (kind, low, high) if x)


def finite(
    value,
    name: str,
    *,
    least: float | None = None,
    most: float | None = None,
    above: float | None = None,
    integer: bool = False,
    where: str = "",
) -> float:
    """``value`` if it is a real number (an int where ``integer``), finite, ``>= least``,
    ``> above`` and ``<= most``; else a ``TypeError`` (not a number, or a bool) or ``ValueError``
    (NaN, infinite, out of range), one line naming ``name`` (prefixed by ``where``, the caller).

    >>> finite(2, "nodes", least=1, integer=True)
    2
    >>> finite(float("nan"), "timeout", above=0, where="virtual.run")
    Traceback (most recent call last):
    ...
    ValueError: virtual.run: argument 'timeout' must be a finite number > 0, got nan
    """
    prefix = f"{where}: " if where else ""
    expected = _bounds(least, most, above, integer)
    kind = numbers.Integral if integer else numbers.Real
    if isinstance(value, bool) or not isinstance(value, kind):
        raise TypeError(f"{prefix}argument {name!r} must be {expected}, got {value!r}")
    bad = not math.isfinite(value) if not integer else abs(value) > LARGEST
    if bad or (least is not None and value < least) or (above is not None and not value > above):
        raise ValueError(f"{prefix}argument {name!r} must be {expected}, got {value!r}")
    if most is not None and value > most:
        raise ValueError(f"{prefix}argument {name!r} must be {expected}, got {value!r}")
    return value


def from_env(variable: str, default: float, environ=None, **bounds) -> float:
    """The number an environment variable holds (``default`` where it is unset or empty),
    checked by :func:`finite` with ``bounds``; a bad value is a ``ValueError`` naming the variable.

    >>> from_env("MYCOLLECTIVES_X", 900.0, {"MYCOLLECTIVES_X": "abc"}, above=0)
    Traceback (most recent call last):
    ...
    ValueError: environment variable MYCOLLECTIVES_X='abc': expected a finite number > 0
    """
    text = (os.environ if environ is None else environ).get(variable, "").strip()
    if not text:
        return default
    try:
        return finite(float(text), variable, **bounds)
    except (TypeError, ValueError):
        raise ValueError(f"environment variable {variable}={text!r}: expected {_bounds(**bounds)}") from None


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line and exit status 2."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def integer(least: int, most: int | None = None) -> Callable[[str], int]:
    """An argparse ``type``: an int in ``[least, most]`` (checked by :func:`finite`)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        return _checked(value, text, least=least, most=most, integer=True)

    parse.__name__ = "integer"
    return parse


def number(
    least: float | None = None, most: float | None = None, above: float | None = None
) -> Callable[[str], float]:
    """An argparse ``type``: a finite float in ``[least, most]`` (and ``> above``; :func:`finite`)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        return _checked(value, text, least=least, most=most, above=above)

    parse.__name__ = "number"
    return parse


def _checked(value, text: str, **bounds):
    try:
        return finite(value, "", **bounds)
    except (TypeError, ValueError):
        expected = _bounds(
            bounds.get("least"), bounds.get("most"), bounds.get("above"), bounds.get("integer", False)
        )
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None


def switch(text: str) -> int:
    """An argparse ``type``: 0 or 1 (nccl-tests' flags)."""
    if text not in ("0", "1"):
        raise argparse.ArgumentTypeError(f"expected 0 or 1, got {text!r}")
    return int(text)


class Refusal(SystemExit):
    """A flag refused after parsing: exit status 2, the message as its text
    (the command prints it as the one line, ``<prog>: error: <message>``)."""

    def __init__(self, message: str):
        super().__init__(2)
        self.message = message

    def __str__(self) -> str:
        return self.message
