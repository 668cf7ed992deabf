"""Chapter 3b's exercise checks: a builder verified for every world size, and
the two design problems, right and wrong."""

from __future__ import annotations

import numpy as np
import pytest

import mycollectives as mc
from mycollectives.algorithms import Spec, build, entry, schedule_for
from mycollectives.book.exercises.choosing import (
    CALIBRATION_SIZES,
    calibration_times,
    check_all_to_all_design,
    check_builder,
    check_calibration_design,
)
from mycollectives.schedule import Round


def direct_all_gather(spec):
    p, c = spec.world_size, spec.count
    src, dst = np.divmod(np.arange(p * p), p)
    keep = src != dst
    return [Round.of(src[keep], dst[keep], src[keep] * c, c)]


def test_builder_right(capsys):
    check_builder(direct_all_gather, "all_gather")
    assert "Correct: verified" in capsys.readouterr().out
    assert "yours" not in mc.algorithms("all_gather")  # taken off the menu again


def test_builder_wrong_block_is_named_and_unregistered():
    def wrong_offset(spec):
        p, c = spec.world_size, spec.count
        src, dst = np.divmod(np.arange(p * p), p)
        keep = src != dst
        return [Round.of(src[keep], dst[keep], dst[keep] * c, c)]  # sends the receiver's block

    with pytest.raises(AssertionError, match="p=2, count 1: .*expected element 0 from ranks"):
        check_builder(wrong_offset, "all_gather")
    assert "yours" not in mc.algorithms("all_gather")


def test_builder_too_many_rounds():
    def one_pair_per_round(spec):
        p, c = spec.world_size, spec.count
        return [Round.of(s, d, s * c, c) for s in range(p) for d in range(p) if s != d]

    with pytest.raises(AssertionError, match="rounds; this algorithm takes 1"):
        check_builder(one_pair_per_round, "all_gather")


@pytest.mark.parametrize(
    "builder",
    [
        lambda spec: list(build(spec, "direct").rounds),  # the library's schedule, via build
        lambda spec: list(schedule_for("all_gather", "direct", spec.world_size, spec.count).rounds),
        lambda spec: entry("all_gather", "direct").build(spec),  # the library's builder itself
    ],
    ids=["build", "schedule_for", "registered builder"],
)
def test_builder_calling_the_librarys_answer_is_refused(builder):
    with pytest.raises(AssertionError, match="called the package's own algorithms"):
        check_builder(builder, "all_gather")
    assert "yours" not in mc.algorithms("all_gather")


def test_builder_refusal_survives_a_cached_schedule():
    """A schedule the library built before (and cached) must not hide the call."""
    spec = Spec("all_gather", 5, count=3, root=0)
    build(spec, "direct")
    with pytest.raises(AssertionError, match="called the package's own algorithms"):
        check_builder(lambda s: list(build(s, "direct").rounds), "all_gather")


def _fit():
    (n1, n2), (t1, t2) = CALIBRATION_SIZES, calibration_times()
    beta = (t2 - t1) / (1.75 * (n2 - n1))
    alpha = (t1 - 1.75 * n1 * beta) / 14
    return alpha, beta


def test_calibration_design_right(capsys):
    alpha, beta = _fit()
    assert alpha == pytest.approx(12e-6, rel=0.01) and beta == pytest.approx(1e-10, rel=0.01)
    check_calibration_design(alpha, beta, 11 * alpha / (1.25 * beta), "recursive_doubling")
    assert capsys.readouterr().out.count("Correct") == 4


def test_calibration_design_wrong(capsys):
    alpha, beta = _fit()
    (n1, n2), (t1, t2) = CALIBRATION_SIZES, calibration_times()
    x = 11 * alpha / (1.25 * beta)
    with pytest.raises(AssertionError, match="2\\(p-1\\)/p of the vector"):
        check_calibration_design(alpha, (t2 - t1) / (2 * (n2 - n1)), x, "recursive_doubling")
    with pytest.raises(AssertionError, match="14 rounds"):
        check_calibration_design((t1 - 1.75 * n1 * beta) / 7, beta, x, "recursive_doubling")
    with pytest.raises(AssertionError, match="crossover"):
        check_calibration_design(alpha, beta, x, "ring")
    with pytest.raises(AssertionError, match="recursive doubling: 3"):
        check_calibration_design(alpha, beta, 14 * alpha / (1.75 * beta), "recursive_doubling")
    assert capsys.readouterr().out == ""


def test_all_to_all_design(capsys):
    small = ("bruck", 6 * (10e-6 + (32 << 10) / 25e9))
    check_all_to_all_design(small, ("pairwise", 63 * (10e-6 + (1 << 20) / 25e9)))
    check_all_to_all_design(small, ("linear", 63 * (10e-6 + (1 << 20) / 25e9)))  # a tie in the model
    assert "ties with" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="pairwise takes .*x the fastest"):
        check_all_to_all_design(("pairwise", 633e-6), ("pairwise", 3.27e-3))
    with pytest.raises(AssertionError, match="time"):
        check_all_to_all_design(("bruck", 1e-3), ("pairwise", 3.27e-3))
    with pytest.raises(AssertionError, match="choose one of"):
        check_all_to_all_design(("ring", 1e-3), ("pairwise", 3.27e-3))
