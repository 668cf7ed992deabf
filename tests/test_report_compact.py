"""The bench's table narrowed for a book page: the same numbers, within 100 columns."""

from __future__ import annotations

from mycollectives.bench import report
from mycollectives.bench.runner import Result
from mycollectives.book.bench import tables

ALGS = ("ring", "recursive_doubling", "reduce_broadcast", "native")


def _results() -> list[Result]:
    return [
        Result("all_reduce", a, n, n // 4, "float", "sum", -1, 2, t * n / 1024, 1.0, b, 0)
        for n in (16384, 262144, 4194304)
        for a, t, b in zip(ALGS, (12.5, 8.25, 30.0, 5.0), (1.23, 0.5, 0.2, 2.3))
    ]


def test_compact_keeps_time_and_busbw_within_100_columns():
    results = _results()
    text = tables.compact(results)
    lines = text.splitlines()
    assert max(map(len, lines)) <= 100
    assert lines[0].split() == list(ALGS)
    assert lines[1].count(" time us  busbw GB/s") == len(ALGS)  # headers apart, not run together
    by = {(r.size, r.algorithm): r for r in results}
    for line in lines[2:]:
        size, *cells = line.split()
        for k, a in enumerate(ALGS):
            r = by[int(size), a]
            assert float(cells[2 * k]) == float(report.time_str(r.time_us))
            assert float(cells[2 * k + 1]) == round(r.busbw, 2)


def test_compact_rows_reads_the_printed_table():
    results = _results()
    printed = "\n".join(
        report.row([r for r in results if r.size == n], ALGS) for n in (16384, 262144, 4194304)
    )
    assert tables.compact_rows(report.parse_table(printed), ALGS) == tables.compact(results, ALGS)
