"""The cost model for CPU processes that share one machine (chapter 3b, the benchmarks page).

Chapter 3's model (:func:`~mycollectives.cost.counted_cost`) assumes a GPU's world:
full-duplex links and an engine per rank. Local processes exchanging
messages through memory (gloo over loopback, or the shared-memory
transport) differ in four ways, each one count per round in
:class:`CpuModel`:

* **both directions are work.** Sending and receiving are memory copies and
  wake-ups done by the same cores, so nothing overlaps: a rank pays
  ``alpha`` for every message it sends *and* every one it receives (LogP's
  overhead ``o`` at both ends, ``culler1993logp``) and ``beta`` for every
  byte either way;
* **a round waits once.** Every round that carries a message also costs
  ``latency`` once, the time from a send to its receiver running (LogP's
  ``L``), which the ranks of one round wait out side by side;
* **cores are shared.** When the ranks outnumber the cores, a round lasts
  at least its total work divided by the cores;
* **caches end.** Once the ranks' buffers together (``world_size`` times
  nccl-tests' ``size``) outgrow the last-level cache, every byte moves and
  is reduced at main memory's speed, ``beta_mem`` and ``gamma_mem``
  (chapter 1's memory hierarchy, on a CPU).

The parameters are fitted to measured sweeps with :func:`.fit.fit`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from ..collectives import Spec
from ..schedule import Schedule
from .counted import Machine


@dataclass(frozen=True)
class CpuModel:
    """CPU processes on a machine of ``cores`` cores (None: one each) whose
    last-level cache holds ``cache_bytes`` (None: unknown, no memory terms)."""

    cores: int | None = None
    cache_bytes: int | None = None

    @property
    def names(self) -> tuple[str, ...]:
        mem = ("beta_mem", "gamma_mem") if self.cache_bytes else ()
        return ("alpha", "latency", "beta", "gamma", *mem)

    def start(self, machine: Machine) -> np.ndarray:
        """A ping-pong calibration's alpha, beta and gamma as a starting point
        (no latency; memory as fast as the cache)."""
        first = [machine.alpha, 0.0, machine.beta, machine.gamma]
        return np.array(first + ([machine.beta, machine.gamma] if self.cache_bytes else []))

    def out_of_cache(self, schedule: Schedule, itemsize: int) -> bool:
        spec = Spec(schedule.collective, schedule.world_size, **schedule.params)
        size = spec.record.size(spec, itemsize)
        return bool(self.cache_bytes) and schedule.world_size * size >= self.cache_bytes

    def rows(self, schedule: Schedule, itemsize: int) -> Iterator[np.ndarray]:
        p, k = schedule.world_size, len(self.names)
        moved = 4 if self.out_of_cache(schedule, itemsize) else 2  # the columns bytes go to
        for rnd in schedule.rounds:
            remote = rnd.src != rnd.dst
            src, dst, nb = rnd.src[remote], rnd.dst[remote], rnd.count[remote] * itemsize
            f = np.zeros((p, k))
            if not len(src):
                yield f
                continue
            pair = np.unique(src * p + dst)  # several pieces to one peer are one message
            f[:, 0] = np.bincount(pair // p, minlength=p) + np.bincount(pair % p, minlength=p)
            f[:, 1] = 1.0
            f[:, moved] = np.bincount(src, weights=nb, minlength=p) + np.bincount(
                dst, weights=nb, minlength=p
            )
            f[:, moved + 1] = np.bincount(dst, weights=nb * rnd.reduce[remote], minlength=p)
            if self.cores is not None and self.cores < p:
                shared = f.sum(axis=0) / self.cores
                shared[1] = 1.0
                f = np.vstack([f, shared])
            yield f
