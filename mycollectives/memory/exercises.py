"""The checks of the introduction, chapter 1 and lab 1 moved to
:mod:`mycollectives.exercises.memory`, beside every other chapter's; this
name stays for pages that still import it."""

from __future__ import annotations

from ..exercises.memory import *  # noqa: F403
from ..exercises.memory import __all__  # noqa: F401
