"""What the doctor reads a rank's record into, whatever wrote it: a :class:`Dump` per
rank file, its :class:`Group` s, and ``ENTRY``, the fields of one call (the package's
recorder writes them; :mod:`.torchfr` converts PyTorch's Flight Recorder into them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Group:
    """One group as one rank recorded it."""

    name: str
    ranks: tuple[int, ...]  # the group's ranks, as the job numbers them
    rank: int  # this rank in the group
    failure: dict | None
    collectives: dict[int, dict] = field(default_factory=dict)  # seq -> entry
    p2p: list[dict] = field(default_factory=list)

    @property
    def key(self) -> tuple[str, tuple[int, ...]]:
        return self.name, self.ranks

    def last(self) -> dict | None:
        """The latest collective entry."""
        return self.collectives[max(self.collectives)] if self.collectives else None


@dataclass
class Dump:
    """One rank's file."""

    rank: int
    job: str
    host: str
    reason: str  # why it was written: a failure, SIGTERM, SIGUSR1, exit, request
    time: float
    stack: list | None  # the main thread's frames, innermost first
    exit_error: str | None  # an uncaught exception the process exited with
    groups: dict[tuple, Group]
    path: Path
    exit_stack: list | None = None  # where the uncaught exception was raised, innermost first
    run: str | None = None  # the run's id, where the recorder wrote one
    started: float | None = None  # when the process started (the recorder's files), else None
    source: str = "mycollectives"  # or "torch": PyTorch's Flight Recorder (no stacks, roots or ops)

    def blocked(self) -> tuple[Group, dict] | None:
        """The call this rank is (or was, when it failed) waiting in: (group, entry), or None."""
        best = None
        for g in self.groups.values():
            for e in [*g.collectives.values(), *g.p2p]:
                if e["state"] in ("running", "waiting", "posted") or (
                    e["state"] == "failed" and e["peer"] is not None
                ):
                    if best is None or e["t_posted"] > best[1]["t_posted"]:
                        best = (g, e)
        return best


ENTRY = dict(  # what an entry holds; a field missing from an odd or older file reads as this
    seq=-1,
    kind="collective",
    fn="?",
    algorithm="",
    dtype=None,
    count=None,
    root=None,
    op=None,
    site=None,
    function=None,
    state="?",
    phase="",
    round=-1,
    rounds=0,
    peer=None,
    what=None,
    t_posted=0.0,
    t_started=None,
    t_done=None,
    error=None,
)
