"""The end of a ``make test`` or ``make test-fast`` run: where the time went, and one closing line.

``python tests/report.py _build/junit/*.xml`` reads the JUnit XML files of
the run's pytest invocations and prints how many pages, cells and outputs
nbval checked (``tests/test_outputs.py`` records them), the slowest ten tests
of the whole run, the seconds of tests each pytest-xdist worker ran, then (when the book was built) the slowest ten pages and cells of the
build (``tests/outputs.py``), then ``summary: N passed, N failed, N skipped``
over every invocation. Its exit status is 1 when a test failed or none ran.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import outputs


def _cases(paths: list[Path]):
    for path in paths:
        yield from ET.parse(path).getroot().iter("testcase")


def _name(case) -> str:
    module = case.get("classname", "").replace(".", "/")
    return f"{module}.py::{case.get('name')}" if module else case.get("name", "?")


def report(paths: list[Path], n: int = 10) -> tuple[str, int]:
    cases = list(_cases(paths))
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    for case in cases:
        kinds = {child.tag for child in case}
        what = "failed" if kinds & {"failure", "error"} else "skipped" if "skipped" in kinds else "passed"
        counts[what] += 1
    nbval = [
        json.loads(p.get("value")) for c in cases for p in c.iter("property") if p.get("name") == "nbval"
    ]
    timed = sorted(((float(c.get("time", 0)), _name(c)) for c in cases), reverse=True)[:n]
    lines = []
    if nbval:
        lines.append(
            f"nbval, on the notebooks the book build executed: {len(nbval)} of {len(outputs.pages())} pages "
            f"checked, {sum(c for _, c, _ in nbval)} code cells executed without error, "
            f"{sum(k for _, _, k in nbval)} checked outputs compared with tests/expected_outputs/"
        )
    lines.append(f"slowest {n} tests of this run (setup, call and teardown):")
    lines += [f"  {s:7.1f} s  {name}" for s, name in timed]
    busy: dict[str, float] = {}  # the seconds of tests each pytest-xdist worker ran (conftest.py)
    for c in cases:
        for p in c.iter("property"):
            if p.get("name") == "worker":
                busy[p.get("value")] = busy.get(p.get("value"), 0.0) + float(c.get("time", 0))
    if len(busy) > 1:
        lines.append(
            "seconds of tests per worker: " + ", ".join(f"{w} {s:.0f} s" for w, s in sorted(busy.items()))
        )
    if any(outputs.executed_path(p).exists() for p in outputs.pages()):
        lines.append(outputs.slowest(n))
    lines.append(
        f"summary: {counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped"
    )
    status = 1 if counts["failed"] or not counts["passed"] else 0
    return "\n".join(lines), status


def main(argv: list[str]) -> int:
    paths = [Path(a) for a in argv if Path(a).exists()]
    if not paths:
        print("summary: no test report found: no test ran", file=sys.stderr)
        return 1
    text, status = report(paths)
    print(text)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
