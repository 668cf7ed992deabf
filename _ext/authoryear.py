"""One author-year style for the whole book, in the text and in the bibliography.

sphinxcontrib-bibtex cites by label (``bibtex_reference_style: label``); this
extension registers a pybtex label style that makes every label read
"Sanders et al. 2009", "Hockney 1994" or "NVIDIA 2024b": surnames (or the
organisation) and the year, with a letter where the same authors and year
would otherwise name two sources. The bibliography page lists the same
labels, so a reader finds "[NVIDIA 2024b]" there exactly as the text wrote
it. Entries are sorted by author, then year, then title.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from pybtex.plugin import register_plugin
from pybtex.richtext import Text
from pybtex.style.formatting.unsrt import Style as UnsrtStyle
from pybtex.style.labels import BaseLabelStyle
from pybtex.style.sorting import BaseSortingStyle
from sphinxcontrib.bibtex.plugin import register_plugin as register_bibtex_plugin
from sphinxcontrib.bibtex.style.referencing import BracketStyle
from sphinxcontrib.bibtex.style.referencing.label import LabelReferenceStyle


def _plain(latex: str) -> str:
    """LaTeX text (braces, accents) as plain text."""
    return str(Text.from_latex(latex)).strip()


def _who(entry: Any) -> str:
    """The authors as a label shows them: one surname, two joined by "and",
    three or more as the first "et al."; an organisation when no person is named."""
    persons = entry.persons.get("author") or entry.persons.get("editor") or []
    names = [_plain(" ".join(p.prelast_names + p.last_names)) for p in persons]
    names = [n for n in names if n and n.lower() != "others"]
    if not names:
        for field in ("organization", "institution", "publisher", "key"):
            if field in entry.fields:
                return _plain(entry.fields[field])
        return entry.key
    more = len(persons) > 2 or any(p.last_names and p.last_names[0].lower() == "others" for p in persons)
    if len(names) == 1 and not more:
        return names[0]
    if len(names) == 2 and not more:
        return f"{names[0]} and {names[1]}"
    return f"{names[0]} et al."


def _year(entry: Any) -> str:
    match = re.search(r"\d{4}", entry.fields.get("year", ""))
    return match.group(0) if match else "n.d."


class AuthorYearLabels(BaseLabelStyle):
    """Labels "Author Year", with a, b, ... where two would read alike."""

    def format_labels(self, sorted_entries):
        labels = [f"{_who(e)} {_year(e)}" for e in sorted_entries]
        total, seen = Counter(labels), Counter()
        for label in labels:
            if total[label] == 1:
                yield label
            else:
                yield label + "abcdefghijklmnopqrstuvwxyz"[seen[label]]
                seen[label] += 1

    def format_label(self, entry):  # pragma: no cover - pybtex calls format_labels
        return f"{_who(entry)} {_year(entry)}"


class AuthorYearSorting(BaseSortingStyle):
    """By the label's author, then year, then title."""

    def sorting_key(self, entry):
        return (_who(entry).lower(), _year(entry), _plain(entry.fields.get("title", "")).lower())


class AuthorYearStyle(UnsrtStyle):
    """pybtex's unsrt entries, labelled and sorted author-year."""

    default_label_style = "authoryear"
    default_sorting_style = "authoryear"


def _brackets() -> BracketStyle:
    return BracketStyle(sep="; ")


@dataclass
class AuthorYearReferences(LabelReferenceStyle):
    """Citations by label, several in one bracket separated by semicolons:
    "[Sanders et al. 2009; Jeaugey 2025]"."""

    bracket_parenthetical: BracketStyle = field(default_factory=_brackets)
    bracket_textual: BracketStyle = field(default_factory=_brackets)
    bracket_label: BracketStyle = field(default_factory=_brackets)


def setup(app: Any) -> dict[str, Any]:
    register_plugin("pybtex.style.labels", "authoryear", AuthorYearLabels)
    register_plugin("pybtex.style.sorting", "authoryear", AuthorYearSorting)
    register_plugin("pybtex.style.formatting", "authoryear", AuthorYearStyle)
    register_bibtex_plugin("sphinxcontrib.bibtex.style.referencing", "authoryear", AuthorYearReferences)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
