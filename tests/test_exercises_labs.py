"""The labs' exercise checks: a right answer passes, typical wrong ones fail saying why,
and nothing is printed as correct before a failure."""

from __future__ import annotations

import pytest

from mycollectives.bench.runner import Result
from mycollectives.book.exercises import labs
from mycollectives.cost import Machine
from mycollectives.cost.fit import Textbook
from tests.unanswered import assert_not_answered


def _fails(match: str, fn, *args, capsys=None):
    with pytest.raises(AssertionError, match=match):
        fn(*args)
    if capsys is not None:
        assert "Correct" not in capsys.readouterr().out


# --- lab 2 -----------------------------------------------------------------------------

RES = {"pairs": [[0, 1], [0, 2]], "alpha": [30e-6, 40e-6], "beta": [1e-9, 2e-9]}


def test_one_way_time(capsys):
    n = 4 << 20
    labs.check_one_way_time(30e-6 + 1e-9 * n, RES)
    assert "Correct" in capsys.readouterr().out
    _fails("bandwidth term alone", labs.check_one_way_time, 1e-9 * n, RES, capsys=capsys)
    _fails("round trip", labs.check_one_way_time, 2 * (30e-6 + 1e-9 * n), RES, capsys=capsys)
    _fails("2\\*\\*20", labs.check_one_way_time, 30e-6 + 1e-9 * 4e6, RES, capsys=capsys)
    _fails("off by", labs.check_one_way_time, 40e-6 + 2e-9 * n, RES, capsys=capsys)  # the other pair
    assert_not_answered(labs.check_one_way_time, None, RES)


# --- lab 3 -----------------------------------------------------------------------------


def _result(algorithm: str, size: int, busbw: float) -> Result:
    return Result("all_reduce", algorithm, size, size // 4, "float", "sum", -1, 2, 1.0, busbw, busbw, 0)


def _run() -> tuple[list[Result], object, object]:
    """Measured: ring fastest at 256 KiB, recursive doubling at 16 KiB (native always faster)."""
    results = [
        _result("ring", 256 << 10, 2.0),
        _result("recursive_doubling", 256 << 10, 1.5),
        _result("native", 256 << 10, 3.0),
        _result("ring", 16 << 10, 0.2),
        _result("recursive_doubling", 16 << 10, 0.4),
        _result("native", 16 << 10, 0.5),
    ]
    model = Textbook()
    return results, model, model.start(Machine(alpha=50e-6, beta=1e-9, gamma=1e-10))


def test_closest_to_native(capsys):
    results, model, params = _run()
    from mycollectives.bench.predicted import predicted_us

    def modelled(n: int) -> str:
        ours = [r for r in results if r.size == n and r.algorithm != "native"]
        return min(ours, key=lambda r: predicted_us(r, model, params)).algorithm

    agrees = modelled(256 << 10) == "ring" and modelled(16 << 10) == "recursive_doubling"
    labs.check_closest_to_native("ring", "recursive_doubling", agrees, results, model, params)
    assert "Correct" in capsys.readouterr().out
    check = labs.check_closest_to_native
    _fails("at_largest: .* not our fastest", check, "recursive_doubling", "recursive_doubling", agrees,
           results, model, params, capsys=capsys)  # fmt: skip
    _fails("at_smallest: .* not our fastest", check, "ring", "ring", agrees, results, model, params)
    _fails("not one of the algorithms", check, "bruck", "ring", agrees, results, model, params)
    _fails("model_agrees", check, "ring", "recursive_doubling", not agrees, results, model, params)
    assert_not_answered(check, "ring", "recursive_doubling", None, results, model, params)


# --- labs 4 to 8 -----------------------------------------------------------------------


def test_bucket_time(capsys):
    labs.check_bucket_time(lambda k, n, p, a, b: k * (2 * (p - 1) * a + 2 * (p - 1) / p * (n / k) * b))
    assert "Correct" in capsys.readouterr().out
    one_bucket = lambda k, n, p, a, b: 2 * (p - 1) * a + 2 * (p - 1) / p * n * b  # noqa: E731
    _fails("alpha is paid k times", labs.check_bucket_time, one_bucket, capsys=capsys)
    whole = lambda k, n, p, a, b: k * (2 * (p - 1) * a + 2 * (p - 1) / p * n * b)  # noqa: E731
    _fails("n / k bytes", labs.check_bucket_time, whole)
    _fails("off by", labs.check_bucket_time, lambda k, n, p, a, b: k * (p - 1) * a)
    _fails("returned None", labs.check_bucket_time, lambda *args: None)


def test_zero3_gpus(capsys):
    labs.check_zero3_gpus(2)
    assert "Correct" in capsys.readouterr().out
    _fails("bf16 weights only", labs.check_zero3_gpus, 1, capsys=capsys)
    _fails("fits with fewer", labs.check_zero3_gpus, 8)
    assert_not_answered(labs.check_zero3_gpus, None)


def test_bubble_microbatches(capsys):
    labs.check_bubble_microbatches(64)
    assert "Correct" in capsys.readouterr().out
    _fails("whole schedule", labs.check_bubble_microbatches, 71, capsys=capsys)  # (p-1)/m < 0.1
    _fails("not below", labs.check_bubble_microbatches, 63)
    _fails("already brings", labs.check_bubble_microbatches, 65)


RUNS = {
    p: {"tokens": 64, "results": [{"k": 2, "loads": [64 * 2 + d for d in (3, -3) * (p // 2)]}]}
    for p in (4, 8)
}


def test_expected_rows(capsys):
    labs.check_expected_rows(lambda T, k, p: T * k, RUNS)
    assert "Correct" in capsys.readouterr().out
    _fails("receives from p", labs.check_expected_rows, lambda T, k, p: T * k / p, RUNS, capsys=capsys)
    _fails("k rows", labs.check_expected_rows, lambda T, k, p: T, RUNS)
    _fails("spread evenly", labs.check_expected_rows, lambda T, k, p: T * k * p, RUNS)


def test_hierarchy_speedup(capsys):
    labs.check_hierarchy_speedup(lambda N, g: ((N * g - 1) / (N * g)) / ((N - 1) / N / g))
    assert "Correct" in capsys.readouterr().out
    right = lambda N, g: ((N * g - 1) / (N * g)) / ((N - 1) / N / g)  # noqa: E731
    _fails("upside down", labs.check_hierarchy_speedup, lambda N, g: 1 / right(N, g), capsys=capsys)
    _fails("1/g of the vector", labs.check_hierarchy_speedup, lambda N, g: right(N, g) / g)
    _fails("returned None", labs.check_hierarchy_speedup, lambda N, g: None)
