"""Who a flight record belongs to: the job, this process's rank in it, and the group."""

from __future__ import annotations

import os


def describe(transport) -> tuple[str, int, str, list[int]]:
    """(job, this process's rank in the job, group name, the group's ranks in the job): what the
    transport says of itself (``TransportBase.describe``)."""
    return transport.describe()


def job_id() -> str:
    """What names this job in dumps: torchrun's run id, Slurm's job, or the launching process."""
    for var in ("MYCOLLECTIVES_JOB", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID"):
        if os.environ.get(var):
            return os.environ[var]
    return f"ppid{os.getppid()}"
