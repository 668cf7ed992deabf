"""``python -m mycollectives.doctor DUMP_DIR [-v]``: what went wrong, in one line (chapter 6).

Exit status: 0 when no fault is found, 1 when one is, 2 when there is nothing to read.
"""

from __future__ import annotations

import argparse
import sys

from . import diagnose, table


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m mycollectives.doctor", description=__doc__.splitlines()[0])
    p.add_argument(
        "directory",
        help="where the ranks' records are: the package's rank*.json (MYCOLLECTIVES_FLIGHT_DIR) or PyTorch's "
        "Flight Recorder dumps (nccl_trace_rank_0 ..., pickle or JSON)",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="also print each rank's calls near the fault")
    args = p.parse_args(argv)
    try:
        diag = diagnose(args.directory)
    except FileNotFoundError as e:
        print(e, file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001 - records the rules did not foresee: one line, not a traceback
        print(
            f"the doctor could not read these records together ({type(e).__name__}: {e}); "
            f"run with -v on each rank's file, or report it",
            file=sys.stderr,
        )
        return 2
    print(diag.line)
    for note in diag.details:
        print(f"  note: {note}", file=sys.stderr)
    if args.verbose and diag.kind != "empty":
        print(table(args.directory, diag.seq))
    return {"ok": 0, "empty": 2}.get(diag.kind, 1)


if __name__ == "__main__":
    sys.exit(main())
