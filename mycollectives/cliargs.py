"""What the package's command lines share: a parser that refuses nonsense in one line.

Every command (``python -m mycollectives.bench``, ``python -m
mycollectives.sim.expect``) refuses a bad flag before doing any work, with
one line on stderr, ``<prog>: error: <flag>: <what was expected>``, and exit
status 2, as argparse does for a flag it cannot parse (argparse itself
prints its usage first; one line is easier to read in a job's log).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line and exit status 2."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def integer(least: int, most: int | None = None) -> Callable[[str], int]:
    """An argparse ``type``: an int in ``[least, most]``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < least or (most is not None and value > most):
            bound = f"from {least} to {most}" if most is not None else f"at least {least}"
            raise argparse.ArgumentTypeError(f"expected an integer {bound}, got {value}")
        return value

    parse.__name__ = "integer"
    return parse


def number(least: float, most: float | None = None) -> Callable[[str], float]:
    """An argparse ``type``: a finite float in ``[least, most]``."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value < least or (most is not None and value > most):
            bound = f"from {least:g} to {most:g}" if most is not None else f"at least {least:g}"
            raise argparse.ArgumentTypeError(f"expected a finite number {bound}, got {text!r}")
        return value

    parse.__name__ = "number"
    return parse


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
