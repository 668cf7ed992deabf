"""nbval itself on one page at a time: ``pytest -m book tests/test_notebooks.py -k PAGE``.

Each MyST notebook is converted with jupytext into _build/nbval/ and executed
by ``pytest --nbval-lax`` in a subprocess. ``--nbval-lax`` checks that every
cell runs without error, and compares the outputs of the cells tagged
``nbval-check-output`` with their expected outputs (``tests/expected_outputs/``,
put into the converted notebook here), sanitised as ``make test`` sanitises
them. ``make test`` does not run this file: it checks the notebooks its strict
build executed (``tests/test_outputs.py``), so that each page executes once.
Labs run in their CPU mode (``MYCOLLECTIVES_DEVICE=cpu``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from nbformat.v4 import new_output

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
TAG = "nbval-check-output"
EXPECTED = ROOT / "tests" / "expected_outputs"


def _with_expected_outputs(nb, page: Path):
    """The tagged cells of ``nb`` given the page's expected outputs, as nbval's reference."""
    path = (EXPECTED / page).with_suffix(".json")
    expected = json.loads(path.read_text())["cells"] if path.exists() else []
    tagged = [c for c in nb.cells if c.cell_type == "code" and TAG in c.metadata.get("tags", [])]
    assert len(tagged) == len(expected), f"{page}: {len(tagged)} tagged cells, {len(expected)} in {path}"
    for number, (cell, want) in enumerate(zip(tagged, expected), 1):
        values = {key: ["\n".join(v) for v in vals] for key, vals in want["outputs"].items()}
        streams = {k: v for k, v in values.items() if k in ("stdout", "stderr")}
        mimes = {k: v for k, v in values.items() if k not in streams}
        cell.outputs = [new_output("stream", name=k, text="".join(v)) for k, v in streams.items()]
        for i in range(max((len(v) for v in mimes.values()), default=0)):
            data = {k: v[i] for k, v in mimes.items() if i < len(v)}
            cell.outputs.append(new_output("display_data", data=data))
        cell.execution_count = number  # nbval compares only cells that ran in the reference
    return nb


# nbval compares every output field but a few; the build's comparison (tests/outputs.py, SKIP) also
# leaves out SVG and HTML (the book's HTML outputs are animations with random element ids), and so
# its expected outputs have none. A conftest beside the converted notebooks tells nbval the same.
_SKIP_CONFTEST = """from nbval.plugin import IPyNbFile

_init = IPyNbFile.__init__


def _init_skipping_html(self, *args, **kwargs):
    _init(self, *args, **kwargs)
    self.skip_compare = self.skip_compare + ("image/svg+xml", "text/html")


IPyNbFile.__init__ = _init_skipping_html
"""


def _sanitize_file(target: Path) -> Path:
    """tests/expected_outputs/sanitize.cfg, after a rule of its own for this checkout's path (``<ROOT>``)."""
    path = target.with_name("sanitize.cfg")
    rules = f"regex: {re.escape(str(ROOT))}\nreplace: <ROOT>\n\n" + (EXPECTED / "sanitize.cfg").read_text()
    path.write_text(rules)
    return path


def test_every_chapter_and_lab_is_a_notebook():
    names = {p.as_posix() for p in PAGES}
    assert "intro.md" in names
    assert any(n.startswith("chapters/") for n in names) and any(n.startswith("labs/") for n in names)


@pytest.mark.timeout(1200)
@pytest.mark.parametrize("page", PAGES, ids=[p.as_posix() for p in PAGES])
def test_notebook_runs(page: Path):
    target = (OUT / page).with_suffix(".ipynb")
    target.parent.mkdir(parents=True, exist_ok=True)
    jupytext.write(_with_expected_outputs(jupytext.read(ROOT / page), page), target)
    (OUT / "conftest.py").write_text(_SKIP_CONFTEST)
    # matplotlib's inline backend, as in the book build: a figure is an output ("<Figure size ...>")
    # in the expected outputs, and under Agg plt.show() would print nothing.
    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"} | {"MYCOLLECTIVES_DEVICE": "cpu"}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax"]
    cmd += [f"--nbval-cell-timeout={CELL_TIMEOUT}", "-o", "timeout=0", str(target)]
    cmd += ["--nbval-sanitize-with", str(_sanitize_file(target))]
    proc = subprocess.run(cmd, cwd=target.parent, env=env, capture_output=True, text=True, timeout=1100)
    assert proc.returncode == 0, f"nbval failed on {page}:\n{proc.stdout[-6000:]}\n{proc.stderr[-2000:]}"
