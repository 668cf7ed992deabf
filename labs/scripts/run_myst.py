"""Run a MyST markdown notebook as a plain Python script, where Jupyter is not installed.

    python labs/scripts/run_myst.py labs/lab1_memory.md --figures out/

The code cells run in order in one namespace, their output going to stdout;
each ``plt.show()`` saves the current figure as ``out/<notebook>_<n>.png``
instead. A GPU node often has torch and matplotlib but no Jupyter: this is
how the book's recorded GPU runs of the labs were made.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

CELL = re.compile(r"^```\{code-cell\}[^\n]*\n(.*?)^```\s*$", re.S | re.M)


def cells(text: str) -> list[str]:
    """The code cells of a MyST notebook, without their ``:tag:`` option lines."""
    out = []
    for body in CELL.findall(text):
        lines = body.splitlines()
        while lines and lines[0].startswith(":"):
            lines.pop(0)
        out.append("\n".join(lines))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("notebook", type=Path)
    ap.add_argument("--figures", type=Path, default=None, help="save each figure here as PNG")
    args = ap.parse_args(argv)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = 0

    def show(*_a: object, **_k: object) -> None:
        nonlocal shown
        shown += 1
        if args.figures is not None:
            args.figures.mkdir(parents=True, exist_ok=True)
            plt.savefig(args.figures / f"{args.notebook.stem}_{shown}.png", dpi=110, bbox_inches="tight")
        plt.close("all")

    plt.show = show
    # as in Jupyter, whose kernel starts in the notebook's folder: a page imports what lies beside it
    sys.path.insert(0, str(args.notebook.resolve().parent))
    namespace: dict[str, object] = {"__name__": "__main__"}
    for i, code in enumerate(cells(args.notebook.read_text())):
        print(f"# --- cell {i + 1}", flush=True)
        exec(compile(code, f"{args.notebook}:cell{i + 1}", "exec"), namespace)
    return 0


if __name__ == "__main__":
    sys.exit(main())
