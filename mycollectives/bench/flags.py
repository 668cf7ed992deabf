"""The bench's flags that need no process: the algorithm list and the sweep's counts and sizes,
checked before anything starts (read by :mod:`.cli` and :mod:`.virtual`)."""

from __future__ import annotations

from ..algorithms import algorithms
from ..cliargs import Refusal
from ..collectives import record
from ..ops import op_dtype_error, resolve_op
from .cases import NATIVE
from .factors import DTYPES, parse_size, sizes


def algorithm_list(spec: str, collective: str) -> list[str]:
    """``"all"``, ``"native"``, one name or a comma list, checked against the menu.

    >>> algorithm_list("ring,native", "all_reduce")
    ['ring', 'native']
    """
    menu = algorithms(collective)
    if spec == "all":
        return ["auto", *menu, NATIVE]
    names = [s.strip() for s in spec.split(",") if s.strip()]
    for n in names:
        if n not in (*menu, "auto", NATIVE):
            raise Refusal(f"--algorithm: {n!r} is not one of {('all', 'auto', NATIVE, *menu)}")
    if not names:
        raise Refusal(f"--algorithm: expected a name, a comma list, 'all' or 'native', got {spec!r}")
    return names


def check_counts(args) -> None:
    """Counts that must be positive, refused before any process starts."""
    for flag, name, least in (
        ("-n/--iters", "iters", 1),
        ("--reps", "reps", 1),
        ("-w/--warmup_iters", "warmup_iters", 0),
    ):
        if getattr(args, name) < least:
            raise Refusal(f"{flag}: expected at least {least}, got {getattr(args, name)}")


def check_op(args) -> None:
    """``-o`` on ``-d``, for a collective that reduces: AVG of integers, say, is refused up front."""
    if record(args.collective).reducing:
        why = op_dtype_error(resolve_op(args.op), DTYPES[args.datatype])
        if why:
            raise Refusal(f"-o/--op {args.op} with -d {args.datatype}: {why}")


def check_sizes(args) -> list[int]:
    """The sweep of ``-b``, ``-e``, ``-f``, ``-i``: sizes of whole elements of ``-d``."""
    item = DTYPES[args.datatype].itemsize
    given = {}
    for flag, name in (
        ("-b/--minbytes", "minbytes"),
        ("-e/--maxbytes", "maxbytes"),
        ("-i/--stepbytes", "stepbytes"),
    ):
        try:
            given[flag] = parse_size(getattr(args, name))
        except ValueError as e:
            raise Refusal(f"{flag}: {e}") from None
        if given[flag] % item:
            raise Refusal(
                f"{flag}: {given[flag]} bytes is not a whole number of {args.datatype} elements "
                f"({item} bytes each)"
            )
    try:
        return sizes(given["-b/--minbytes"], given["-e/--maxbytes"], args.stepfactor, given["-i/--stepbytes"])
    except ValueError as e:
        raise Refusal(f"-b/-e/-f/-i: {e}") from None
