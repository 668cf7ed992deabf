"""Check functions for chapter 4's exercises on NCCL's cost model ("Inside NCCL").

Each ``check_*`` raises ``AssertionError`` with a message that says what is
wrong, or prints what was right; it returns nothing. The expected values
come from ``mycollectives.nccl``, NCCL 2.30.7's model, so the notebook shows
the question and not the answer.
"""

from __future__ import annotations

from collections.abc import Callable

from ..sim.nccl import choose
from ..topology import Topology, dgx_h100
from .answers import exercise

# --- exercise: pick NCCL's protocol ------------------------------------------------------


def _sizes() -> list[int]:
    return [1 << k for k in range(3, 31, 2)]  # 8 B .. 512 MiB


@exercise
def check_protocol_choice(fn: Callable[[int], str], topology: Topology | None = None) -> None:
    """Chapter 4: ``fn(nbytes)`` picks the protocol NCCL's model picks for a ring all-reduce.

    Compared at sizes 8 B .. 512 MiB on a DGX H100 (by default) with NCCL's
    own formulas (:mod:`mycollectives.nccl.model`); a size where the two best
    protocols are within 2 % of each other accepts either.
    """
    topo = topology or dgx_h100()
    for n in _sizes():
        got = fn(n)
        assert isinstance(got, str), (
            f"fn({n}) returned {got!r}; return a protocol name: 'Simple', 'LL128' or 'LL'"
        )
        best, table = choose("all_reduce", n, topo, algorithms=["Ring"])[1:]
        t = {proto: table["Ring", proto] for _, proto in table}
        names = {k.lower(): k for k in t}
        assert got.lower() in names, f"fn({n}) returned {got!r}; expected one of {tuple(t)}"
        if t[names[got.lower()]] <= t[best] * 1.02:
            continue
        shown = ", ".join(f"{k} {1e6 * v:.1f} us" for k, v in t.items())
        raise AssertionError(
            f"at {n} bytes you picked {got!r}, but {best!r} is faster ({shown}): time = latency + n / bandwidth, "
            "with each protocol's factor and ceiling applied to the bus bandwidth before dividing by 2(p-1)/p"
        )
    print(
        f"Correct: your choice matches NCCL's model at every size from {_sizes()[0]} B to {_sizes()[-1] >> 20} MiB"
    )


__all__ = ["check_protocol_choice"]
