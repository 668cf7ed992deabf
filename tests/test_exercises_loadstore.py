"""The checks of the page on loads and stores: right answers pass, typical
wrong ones fail with a message that says what was left out."""

from __future__ import annotations

import pytest

from mycollectives.book.exercises import loadstore as ex
from tests.unanswered import assert_not_answered

MIB = 1 << 20


def test_copies_right_and_wrong(capsys):
    ex.check_copies(56, 28)  # 8 ranks, 32 MiB: 7/8 of it received, as much sent
    assert "Correct" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="copied twice"):
        ex.check_copies(28, 28)
    with pytest.raises(AssertionError, match="already holds its own"):
        ex.check_copies(56, 32)
    assert_not_answered(ex.check_copies, None, 28)
    with pytest.raises(AssertionError, match="with loads"):
        ex.check_copies(56, 24)
    with pytest.raises(AssertionError):
        ex.check_copies(96, 48)  # the page's printed example (4 ranks, 64 MiB) is not this answer
    assert "Correct" not in capsys.readouterr().out  # never success before a failure


def test_barriers_counted_from_the_plan():
    assert ex.barriers("all_reduce", "one_shot", 4) == 2
    assert ex.barriers("all_reduce", "direct", 4) == 3
    assert ex.barriers("all_reduce", "ring", 4) == 2 * 3 + 1
    ex.check_barriers({"ring": 7, "direct": 3, "one_shot": 2})
    with pytest.raises(AssertionError, match="land on the vector"):
        ex.check_barriers({"ring": 7, "direct": 3, "one_shot": 3})
    with pytest.raises(AssertionError, match="missing"):
        ex.check_barriers({"ring": 7})


def test_crossover_matches_the_closed_form():
    # p = 2: one-shot a + n(b + g), two-shot 2a + n b + n g / 2: equal at n = 2a / g
    assert ex.crossover(2, ex.Machine(alpha=10e-6, beta=1.5e-10, gamma=1.5e-10, loads=True)) == pytest.approx(
        2 * 10e-6 / 1.5e-10, rel=1e-3
    )
    alpha, beta, gamma = 10e-6, 1.5e-10, 0.5e-10  # the exercise's: beta != gamma
    ex.check_crossover(2 * alpha / gamma)
    with pytest.raises(AssertionError, match="two-shot adds too"):  # took two-shot's adds as free
        ex.check_crossover(alpha / gamma)
    with pytest.raises(AssertionError, match="two-shot reads twice"):  # forgot the all-gather's reads
        ex.check_crossover(2 * alpha / (beta + gamma))
    with pytest.raises(AssertionError, match="off by 2x to 10x \\(too high\\)"):
        ex.check_crossover(8 * alpha / gamma)
    with pytest.raises(ValueError, match="beta != gamma"):
        ex.check_crossover(1e5, gamma=beta)  # the two mistakes would give one number


def test_nvlink_choice():
    p, link, sync = 8, 450e9, 3e-6
    times = {(a, s): t for s in (256 << 10, 64 * MIB) for a, t in ex.nvlink_choice(p, s, link, sync).items()}
    ex.check_nvlink_choice(times)
    small = ex.nvlink_choice(p, 256 << 10, link, sync)
    large = ex.nvlink_choice(p, 64 * MIB, link, sync)
    assert min(large, key=large.get) == "multimem" and large["two_shot"] < large["one_shot"]
    assert small["one_shot"] < 1.2 * small["two_shot"]  # latency-bound: one barrier is worth (p-1)n/link
    wrong = dict(times)
    wrong["one_shot", 64 * MIB] = 64 * MIB / link + sync  # forgot that one-shot reads every peer's vector
    with pytest.raises(AssertionError, match="one_shot at"):
        ex.check_nvlink_choice(wrong)


def test_nvlink_choice_counts_multimem_as_chapters_4_and_6_do():
    """n(1 + 1/p) each way through a GPU's link, the figure of chapter 4's text, the simulator's
    NVLS and chapter 6's check_nvls_link_rate; the old 2n/p fails."""
    p, link, sync, n = 8, 450e9, 3e-6, 64 * MIB
    assert ex.nvlink_choice(p, n, link, sync)["multimem"] == pytest.approx(2 * sync + (1 + 1 / p) * n / link)
    times = {(a, s): t for s in (256 << 10, n) for a, t in ex.nvlink_choice(p, s, link, sync).items()}
    times["multimem", n] = 2 * sync + 2 * n / p / link
    with pytest.raises(AssertionError, match="multimem at .*too low"):
        ex.check_nvlink_choice(times)
