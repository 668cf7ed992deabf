"""The rendered book carries no path of the machine that built it.

Every text file of ``_build/html`` (pages, their sources, the executed
notebooks offered for download, search index) is searched for the checkout's
absolute path, the Python environment's, the home directory's and a
temporary directory's (``tempfile``'s random names). A page that prints
where a file went prints it relative to the checkout. Without a built book the test skips (in CI,
``CI=true``, it fails).
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.built
ROOT = Path(__file__).resolve().parents[1]
HTML = ROOT / "_build" / "html"
TEXT = {".html", ".txt", ".md", ".ipynb", ".js", ".json", ".py"}
SKIP_DIRS = {"_static", "mathjax", "_sphinx_design_static"}  # the themes' and MathJax's own files


def machine_paths() -> list[str]:
    """The absolute paths that would tell where the book was built."""
    paths = {str(ROOT), os.path.realpath(ROOT), sys.prefix, os.path.realpath(sys.prefix)}
    paths.add(str(Path.home()) + "/")
    return sorted(p for p in paths if p.strip("/"))


def leaks(text: str, paths: list[str]) -> list[str]:
    """Each occurrence of one of ``paths``, or of a temporary directory, in ``text``, with the words around it."""
    temporary = re.escape(tempfile.gettempdir()) + r"/tmp[a-z0-9_]{8}"  # tempfile.mkdtemp's names
    found = []
    for pattern in [re.escape(p) for p in paths] + [temporary]:
        for m in re.finditer(pattern, text):
            found.append(text[max(0, m.start() - 60) : m.end() + 40].replace("\n", " "))
    return found


def _files() -> list[Path]:
    return [
        p
        for p in HTML.rglob("*")
        if p.is_file() and p.suffix in TEXT and not SKIP_DIRS & set(p.relative_to(HTML).parts)
    ]


def test_the_check_finds_a_path_of_this_machine():
    paths = machine_paths()
    assert str(ROOT) in paths
    page = f"<pre>trace written to {ROOT}/_build/labs/trace.json</pre><p>see _build/labs/trace.json</p>"
    (hit,) = leaks(page, paths)
    assert hit.startswith(f"<pre>trace written to {ROOT}/_build/labs/trace.json</pre>")
    assert len(leaks(f"<pre>{tempfile.gettempdir()}/tmpa8x_3kq0/result.json</pre>", paths)) == 1
    assert leaks("<pre>trace written to _build/labs/trace.json</pre>", paths) == []


def test_no_rendered_file_holds_an_absolute_path_of_the_build_machine():
    if not (HTML / "intro.html").exists():
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("no built book in _build/html")
        pytest.skip("no built book in _build/html: run `make book` first")
    paths = machine_paths()
    found = {}
    for path in _files():
        hits = leaks(path.read_text(errors="replace"), paths)
        if hits:
            found[path.relative_to(HTML).as_posix()] = hits[:3]
    assert not found, "paths of the build machine in the rendered book:\n" + "\n".join(
        f"  {name}: {hits}" for name, hits in sorted(found.items())
    )
