"""nbval on every page of the book: each MyST notebook is converted with jupytext
into _build/nbval/ and executed by ``pytest --nbval-lax`` in a subprocess.

``--nbval-lax`` checks that every cell runs without error (outputs are not
compared: they are measurements); correctness is asserted inside the cells.
Labs run in their CPU mode (``MYCOLLECTIVES_DEVICE=cpu``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "_build" / "nbval"
CELL_TIMEOUT = 300  # seconds per cell
PAGES = sorted(
    p.relative_to(ROOT)
    for p in [
        ROOT / "intro.md",
        *ROOT.glob("chapters/*.md"),
        *ROOT.glob("labs/*.md"),
        *ROOT.glob("appendix/*.md"),
    ]
    if p.read_text().startswith("---\njupytext:")
)

jupytext = pytest.importorskip(
    "jupytext", reason="the book's dependencies are not installed (pip install -e .[book])"
)
pytest.importorskip("nbval", reason="nbval is not installed (pip install -e .[test])")
pytestmark = pytest.mark.book


def test_every_chapter_and_lab_is_a_notebook():
    names = {p.as_posix() for p in PAGES}
    assert "intro.md" in names
    assert any(n.startswith("chapters/") for n in names) and any(n.startswith("labs/") for n in names)


@pytest.mark.timeout(1200)
@pytest.mark.parametrize("page", PAGES, ids=[p.as_posix() for p in PAGES])
def test_notebook_runs(page: Path):
    target = (OUT / page).with_suffix(".ipynb")
    target.parent.mkdir(parents=True, exist_ok=True)
    jupytext.write(jupytext.read(ROOT / page), target)
    env = {**os.environ, "MYCOLLECTIVES_DEVICE": "cpu", "MPLBACKEND": "Agg"}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax"]
    cmd += [f"--nbval-cell-timeout={CELL_TIMEOUT}", "-o", "timeout=0", str(target)]
    proc = subprocess.run(cmd, cwd=target.parent, env=env, capture_output=True, text=True, timeout=1100)
    assert proc.returncode == 0, f"nbval failed on {page}:\n{proc.stdout[-6000:]}\n{proc.stderr[-2000:]}"
