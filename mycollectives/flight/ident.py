"""Who a flight record belongs to: the job, this process's rank in it, and the group."""

from __future__ import annotations

import itertools
import os

_local_worlds = itertools.count()  # a local world's number, never reused (an id() may be)


def describe(transport) -> tuple[str, int, str, list[int]]:
    """(job, this process's rank in the job, group name, the group's ranks in the job)."""
    p = transport.world_size
    if getattr(transport, "local", False):
        world = getattr(transport, "mail", None) or getattr(
            transport, "cluster", transport
        )  # one job per run
        job = getattr(world, "_flight_job", None)
        if job is None:
            job = f"local-{os.getpid()}-{next(_local_worlds)}"
            try:
                world._flight_job = job
            except AttributeError:  # a world that takes no attributes: its id, unique while it lives
                job = f"local-{os.getpid()}-{id(world):x}"
        return job, transport.rank, "local world", list(range(p))
    import torch.distributed as dist

    group = getattr(transport, "group", None)
    if group is None and hasattr(transport, "inner"):
        group = transport.inner.group
    try:
        ranks = dist.get_process_group_ranks(group)
        name = "default" if group is dist.group.WORLD else str(getattr(group, "group_name", "group"))
        owner = dist.get_rank()
    except (RuntimeError, ValueError, AttributeError):
        ranks, name, owner = list(range(p)), "group", transport.rank
    return job_id(), owner, name, ranks


def job_id() -> str:
    """What names this job in dumps: torchrun's run id, Slurm's job, or the launching process."""
    for var in ("MYCOLLECTIVES_JOB", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID"):
        if os.environ.get(var):
            return os.environ[var]
    return f"ppid{os.getppid()}"
