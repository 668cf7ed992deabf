"""The bibliography: every source dated and attributed, every label distinct,
every citation of the book resolving (the strict build checks resolution
too; this test says which key and page, in a second)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pybtex = pytest.importorskip("pybtex.database")
pytest.importorskip("sphinxcontrib.bibtex")
sys.path.insert(0, str(ROOT / "_ext"))
import authoryear  # noqa: E402

PAGES = [
    p
    for p in ROOT.rglob("*.md")
    if not set(p.relative_to(ROOT).parts) & {"_build", ".venv", "node_modules", "benchmarks"}
]
CITE = re.compile(r"\{cite(?::\w+)?\}`([^`]+)`")


def _entries():
    return pybtex.parse_file(str(ROOT / "references.bib")).entries


def test_every_source_has_a_year_and_an_author_or_organisation():
    bad = []
    for key, entry in _entries().items():
        label = f"{authoryear._who(entry)} {authoryear._year(entry)}"
        if "n.d." in label or label.startswith(key):
            bad.append(f"{key}: label would read {label!r}")
    assert not bad, "\n".join(bad)


def test_labels_are_distinct_and_author_year():
    entries = list(_entries().values())
    ordered = sorted(entries, key=authoryear.AuthorYearSorting().sorting_key)
    labels = list(authoryear.AuthorYearLabels().format_labels(ordered))
    assert len(set(labels)) == len(labels)
    for label in labels:
        assert re.fullmatch(r".+ \d{4}[a-z]?", label), label


def test_every_citation_resolves():
    keys = set(_entries())
    missing = [
        f"{page.relative_to(ROOT)}: {key}"
        for page in PAGES
        for group in CITE.findall(page.read_text())
        for key in (k.strip() for k in group.split(","))
        if key not in keys
    ]
    assert not missing, missing
