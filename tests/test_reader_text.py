"""Pages speak to readers: none tells them about the book's own tests, how it is
built, or the cores of the machine that built it (chapters 5 and 6, lab 6, the
glossary and the appendix on adding an algorithm have their own owners)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SKIP = ("05_", "06_", "lab6_", "_", "glossary", "adding_an_algorithm")
PAGES = sorted(
    p
    for p in [*ROOT.glob("chapters/*.md"), *ROOT.glob("labs/*.md"), *ROOT.glob("appendix/*.md")]
    if not p.name.startswith(SKIP)
)
FORBIDDEN = re.compile(
    r"book's tests|the tests run|a test holds|when the book is built|this machine's cores|two cores"
    r"|no NVIDIA GPU on this machine",
    re.I,
)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_page_talks_about_the_books_tests_or_build_machine(page):
    text = " ".join(page.read_text().split())
    found = FORBIDDEN.findall(text)
    assert not found, f"{page.name}: {found}"
