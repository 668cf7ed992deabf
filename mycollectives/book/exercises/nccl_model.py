"""Check functions for chapter 4's exercises on NCCL's cost model ("Inside NCCL").

Each ``check_*`` raises ``AssertionError`` with a message that says what is
wrong, or prints what was right; it returns nothing. The expected values
come from ``mycollectives.nccl``, NCCL 2.30.7's model, so the notebook shows
the question and not the answer.
"""

from __future__ import annotations

from collections.abc import Callable

from ...nccl import model as _model
from ...sim import nccl as _sim_nccl
from ...sim import tuner as _tuner
from ...sim.nccl import choose
from ...topology import Topology, dgx_h100
from .answers import exercise
from .watch import library_calls

# --- exercise: pick NCCL's protocol ------------------------------------------------------


def _grid() -> list[int]:
    return [1 << k for k in range(3, 31, 2)]  # 8 B .. 512 MiB


def _best(n: int, topo: Topology) -> str:
    return choose("all_reduce", n, topo, algorithms=["Ring"])[1]


#: How far either side of each crossover the check looks: a formula with a wrong factor or a
#: missing cap moves a crossover, and is caught there even where it agrees on the whole grid.
PROBES = (1.05, 1.1, 1.25, 1.5)
#: Where two protocols' times are this close, either is accepted (a crossover's neighbourhood).
TIE = 1e-3


def _sizes(topo: Topology) -> list[int]:
    """The grid, plus sizes at :data:`PROBES` on either side of each size where the model's choice
    changes."""
    grid, extra = _grid(), []
    for lo, hi in zip(grid, grid[1:]):
        if _best(lo, topo) != _best(hi, topo):
            while hi - lo > max(1, lo // 256):  # bisect to the crossover
                mid = (lo + hi) // 2
                lo, hi = (mid, hi) if _best(mid, topo) == _best(lo, topo) else (lo, mid)
            extra += [int(hi * f) for f in PROBES] + [int(hi / f) for f in PROBES]
    return sorted(set(grid + extra))


_ALLOWED = {"system", "_shape", "hardware", "nccl_name"}  # building the system the exercise reads


def _is_the_tuner(code) -> bool:
    """The package's pricing of NCCL's algorithms and protocols (what the exercise asks for)."""
    files = (_sim_nccl.__file__, _model.__file__, _tuner.__file__)
    return code.co_filename in files and code.co_name not in _ALLOWED


@exercise
def check_protocol_choice(fn: Callable[[int], str], topology: Topology | None = None) -> None:
    """Chapter 4: ``fn(nbytes)`` picks the protocol NCCL's model picks for a ring all-reduce.

    Compared at sizes 8 B .. 512 MiB on a DGX H100 (by default) with NCCL's
    own formulas (:mod:`mycollectives.nccl.model`), and either side of every
    crossover; a size where the two best protocols are within 0.1 % of each
    other accepts either. A function that calls the package's model of the
    tuner is refused.
    """
    topo = topology or dgx_h100()
    called = library_calls(fn, (1 << 20,), _is_the_tuner)
    assert not called, (
        f"your function called the package's model of NCCL's tuner ({', '.join(called)}); "
        "write the formula from the constants and the ring graph"
    )
    for n in _sizes(topo):
        got = fn(n)
        assert isinstance(got, str), (
            f"fn({n}) returned {got!r}; return a protocol name: 'Simple', 'LL128' or 'LL'"
        )
        best, table = choose("all_reduce", n, topo, algorithms=["Ring"])[1:]
        t = {proto: table["Ring", proto] for _, proto in table}
        names = {k.lower(): k for k in t}
        assert got.lower() in names, f"fn({n}) returned {got!r}; expected one of {tuple(t)}"
        if t[names[got.lower()]] <= t[best] * (1 + TIE):
            continue
        raise AssertionError(
            f"at {n} bytes you picked {got!r}, but another protocol is faster there: time = latency + "
            "n / bandwidth, with each protocol's factor AND its ceiling (LL128's per channel, LL's per "
            "architecture) applied to the bus bandwidth before dividing by 2(p-1)/p"
        )
    print(f"Correct: your choice matches NCCL's model from {_grid()[0]} B to {_grid()[-1] >> 20} MiB")


__all__ = ["check_protocol_choice"]
