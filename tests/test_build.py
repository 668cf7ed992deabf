"""The book's build never reports success over a broken page (``_ext/execution.py``).

A throwaway two-page book with this book's execution settings: a page with a
failing cell fails the build, again on the next build (the execution cache
does not hide it), and publishes none of its outputs; fixed, it builds.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml", reason="needs PyYAML (the book's dependencies)")

ROOT = Path(__file__).resolve().parents[1]
JUPYTER_BOOK = Path(sys.executable).with_name("jupyter-book")
FLAGS = ["-q", "--warningiserror", "--keep-going"]  # as `make book`

PAGE = """---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---

# Page

```{{code-cell}} ipython3
print("first " + "cell")
```

```{{code-cell}} ipython3
{cell}
```
"""


def _config() -> dict:
    return yaml.safe_load((ROOT / "_config.yml").read_text())


def test_the_book_runs_the_execution_check_with_a_short_cell_limit():
    config = _config()
    assert config["execute"]["execute_notebooks"] == "cache"
    assert config["execute"]["allow_errors"] is False
    assert config["execute"]["timeout"] <= 60
    assert config["sphinx"]["local_extensions"]["execution"] == "_ext"


def _book(tmp_path: Path, cell: str) -> Path:
    book = tmp_path / "book"
    (book / "_ext").mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "_ext" / "execution.py", book / "_ext")
    config = {
        "title": "t",
        "only_build_toc_files": True,
        "exclude_patterns": ["_build"],
        "execute": _config()["execute"],
        "sphinx": {"local_extensions": {"execution": "_ext"}},
    }
    (book / "_config.yml").write_text(yaml.safe_dump(config))
    (book / "_toc.yml").write_text("format: jb-book\nroot: intro\nchapters:\n  - file: page\n")
    (book / "intro.md").write_text("# Intro\n\nText.\n")
    (book / "page.md").write_text(PAGE.format(cell=cell))
    return book


def _build(book: Path, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(JUPYTER_BOOK), "build", ".", *flags],
        cwd=book,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.book
@pytest.mark.skipif(not JUPYTER_BOOK.exists(), reason="needs the book's dependencies (jupyter-book)")
def test_a_failed_page_fails_every_build_until_it_is_fixed(tmp_path):
    book = _book(tmp_path, 'raise RuntimeError("planted failure")')
    html = book / "_build" / "html"
    for flags in (FLAGS, FLAGS, ["-q"]):  # twice as `make book`, then even without -W
        run = _build(book, *flags)
        log = run.stdout + run.stderr
        assert run.returncode != 0, log
        assert "executing page.md ..." in log and "page.md: ERROR: executing the page failed" in log, log
        assert "RuntimeError: planted failure" in log, log
        published = "\n".join(p.read_text(errors="replace") for p in html.rglob("*") if p.is_file())
        assert "first cell" not in published and "Traceback" not in published
        assert str(tmp_path) not in published
        assert not (html / "reports").exists() and list((book / "_build" / "reports").glob("*.log"))

    (book / "page.md").write_text(PAGE.format(cell='print("fixed")'))
    run = _build(book, *FLAGS)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "executing page.md ..." in run.stdout and "slowest cell" in run.stdout, run.stdout
    assert "executed 1 page(s)" in run.stdout
    assert "fixed" in (html / "page.html").read_text()
    again = _build(book, *FLAGS)  # warm: from the cache, nothing executed
    assert again.returncode == 0 and "executing" not in again.stdout, again.stdout
