"""Checks for the book's exercises.

:func:`check_collective` runs a reader's collective, written from send/recv,
on local worlds of several sizes and says which rank and which chunk is wrong,
or who waits on whom when it hangs. Chapter-specific checks (numbers to
compute) live beside it, one module per chapter.
"""

from __future__ import annotations

from .check import COLLECTIVES, ExerciseFailure, check_collective

__all__ = ["COLLECTIVES", "ExerciseFailure", "check_collective"]
