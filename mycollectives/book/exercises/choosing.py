"""Check functions for chapter 3b ("Direct algorithms, measured costs and how libraries choose").

* :func:`check_builder`: the reader writes an algorithm as a builder (a
  function from a ``Spec`` to rounds), which is registered for the check,
  proved by the verifier for world sizes 1 to 8 and several counts, and
  unregistered again;
* :func:`check_calibration_design`: alpha and beta from two measured ring
  all-reduces, the crossover they imply, and the choice it dictates;
* :func:`check_all_to_all_design`: the all-to-all for a small and a large
  dispatch.

Expected values come from the package (the verifier, the closed forms, the
counted cost); a wrong answer gets a message that names the likely mistake.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from ...algorithms import Spec, build, register, unregister
from ...algorithms import registry as _registry
from ...collectives import record
from ...cost import Machine, crossover_size
from ...verify import VerificationError, verify
from .algorithms import choice_line
from .answers import exercise, expect, near, need, number, passed
from .watch import library_calls


@exercise
def check_builder(
    fn: Callable | None, collective: str = "all_gather", max_rounds: int | None = 1, name: str = "yours"
) -> None:
    """Verify the reader's builder ``fn(spec) -> list[Round]`` for ``collective`` on
    world sizes 1 to 8 and counts 0, 1 and 3 (every root of a rooted collective),
    and that it takes at most ``max_rounds`` rounds."""
    need(fn, "your builder")
    _refuse_the_librarys(fn, Spec(collective, 5, count=3, root=0))
    register(collective, name)(fn)
    cases = 0
    try:
        for p in range(1, 9):
            for count in (0, 1, 3):
                for root in range(p) if record(collective).rooted else (0,):
                    spec = Spec(collective, p, count=count, root=root)
                    s = build(spec, name)
                    try:
                        verify(s)
                    except VerificationError as e:
                        raise AssertionError(f"p={p}, count {count}: {e}") from None
                    if max_rounds is not None and p > 1 and count and len(s.rounds) > max_rounds:
                        raise AssertionError(
                            f"p={p}: {len(s.rounds)} rounds; this algorithm takes {max_rounds}: "
                            "put transfers that may run together into one Round"
                        )
                    cases += 1
    finally:
        unregister(collective, name)
    passed(f"Correct: verified for {cases} calls (p = 1..8, counts 0, 1, 3)")


def _refuse_the_librarys(fn: Callable, spec: Spec) -> None:
    """Fail if ``fn(spec)`` runs any code of the package's algorithms (a registered builder,
    ``build``, ``schedule_for``): the exercise asks for a builder of one's own."""
    library = str(Path(_registry.__file__).parent)
    build.cache_clear()  # a cached schedule would come back without running the library's code
    called = library_calls(fn, (spec,), lambda code: code.co_filename.startswith(library))
    if called:
        raise AssertionError(
            f"your builder called the package's own algorithms ({', '.join(called)}); "
            "build the Round from the spec yourself with Round.of"
        )


#: The two sizes at which the calibration problem's ring all-reduce (8 ranks) was measured.
CALIBRATION_SIZES = (64 << 10, 64 << 20)
_TRUE = Machine(alpha=12e-6, beta=1e-10, gamma=0.0)  # what the "measurements" were made with


def calibration_times() -> tuple[float, float]:
    """The two measured times of the problem (seconds): the ring's closed form on
    8 ranks, rounded to what a benchmark prints."""
    p = 8
    t = [2 * (p - 1) * _TRUE.alpha + 2 * (p - 1) / p * n * _TRUE.beta for n in CALIBRATION_SIZES]
    return round(t[0], 7), round(t[1], 5)


@exercise
def check_calibration_design(
    alpha: float | None, beta: float | None, crossover: float | None, choice: str | None
) -> None:
    """Chapter 3b's first design problem: alpha and beta from the two ring times,
    the size from which the ring is no slower than recursive doubling on 8 ranks,
    and the algorithm for a 256 KiB all-reduce."""
    (n1, n2), (t1, t2) = CALIBRATION_SIZES, calibration_times()
    p = 8
    beta_want = (t2 - t1) / (2 * (p - 1) / p * (n2 - n1))
    alpha_want = (t1 - 2 * (p - 1) / p * n1 * beta_want) / (2 * (p - 1))
    a, b = number(alpha, "alpha (s)"), number(beta, "beta (s per byte)")
    if near(b, (t2 - t1) / (2 * (n2 - n1)), 0.02):
        raise AssertionError("beta: a ring rank sends 2(p-1)/p of the vector, not 2n: 1.75 n on 8 ranks")
    if near(a, (t1 - 2 * (p - 1) / p * n1 * beta_want) / (p - 1), 0.02):
        raise AssertionError("alpha: a ring all-reduce takes 2(p-1) = 14 rounds, each paying alpha")
    lines = [
        expect(
            a, alpha_want, "alpha (s)", rel=0.02, hint="solve the two equations t = 14 alpha + 1.75 n beta"
        ),
        expect(b, beta_want, "beta (s/B)", rel=0.02, hint="subtract the two equations: alpha cancels"),
    ]
    fitted = Machine(alpha=alpha_want, beta=beta_want, gamma=0.0)
    want_x = crossover_size("all_reduce", "recursive_doubling", "ring", p, fitted)
    lines.append(
        expect(
            crossover,
            want_x,
            "ring no slower than recursive doubling from (bytes)",
            rel=0.02,
            hint="recursive doubling: 3 (alpha + n beta); set it equal to the ring's time",
        )
    )
    need(choice, '"ring" or "recursive_doubling"')
    want = "recursive_doubling" if 256 << 10 < want_x else "ring"
    assert choice == want, f"256 KiB is {'below' if want != 'ring' else 'above'} the crossover: {want}"
    lines.append(f"Correct: {want} for 256 KiB")
    passed(*lines)


#: The all-to-all problem's machine (64 ranks), 10 us per message and 25 GB/s.
A2A_MACHINE = Machine(alpha=10e-6, beta=1 / 25e9, gamma=0.0)
A2A_MENU = ("linear", "pairwise", "bruck")


@exercise
def check_all_to_all_design(small: Sequence | None, large: Sequence | None) -> None:
    """Chapter 3b's second design problem: the all-to-all on 64 ranks of
    ``A2A_MACHINE`` for 64 KiB and for 64 MiB per rank, each ``(algorithm, seconds)``."""
    passed(
        choice_line(small, "all_to_all", 64, 64 << 10, A2A_MACHINE, A2A_MENU),
        choice_line(large, "all_to_all", 64, 64 << 20, A2A_MACHINE, A2A_MENU),
    )


__all__ = [
    "A2A_MACHINE",
    "CALIBRATION_SIZES",
    "calibration_times",
    "check_all_to_all_design",
    "check_builder",
    "check_calibration_design",
]
