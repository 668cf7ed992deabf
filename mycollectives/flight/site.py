"""Where the program called a collective: the first frame outside the package's API, the recorder,
the torch.distributed patch and torch itself, found cheaply on every call (:func:`site`)."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def _dirs(path: Path) -> tuple[str, ...]:
    """``path`` as the prefix of a file name, both as given and resolved (directories end in a separator)."""
    tail = os.sep if path.is_dir() else ""
    return tuple({str(path) + tail, str(path.resolve()) + tail})


# Frames that are not the caller's: the API, the recorder, the torch.distributed patch, and torch
# (decorators, DDP's hooks). Code of the package above the API (the bench, the exercises) is a caller.
_HERE = Path(__file__).resolve().parent  # the recorder's own package
_SKIP = _dirs(_HERE) + _dirs(_HERE.parent / "api") + _dirs(_HERE.parent / "patch.py")
try:
    import torch as _torch

    _SKIP += _dirs(Path(_torch.__file__).parent)
except ImportError:  # pragma: no cover
    pass


_inside: dict = {}  # code object -> whether it is the package's or torch's (a cache: no string test per call)
_depth: dict[str, int] = {}  # API function -> how deep below _site its last internal frame was


def _internal(code) -> bool:
    inside = _inside.get(code)
    if inside is None:
        inside = _inside[code] = code.co_filename.startswith(_SKIP)
    return inside


def site(fn: str):
    """(code, instruction offset) of the first caller outside the package; the dump finds the line.

    Each frame object Python has to build costs time (more than ``f_lineno``,
    which costs several times ``f_lasti``), so after the first call of ``fn``
    the depth of the last internal frame is remembered and only two frames are
    built: that one, to check it is internal, and its caller. A call that came
    another way (through the torch.distributed patch, say) walks again.
    """
    d = _depth.get(fn)
    if d is not None:
        try:
            f = sys._getframe(d)
        except ValueError:
            f = None
        if f is not None and _internal(f.f_code):
            g = f.f_back
            if g is not None and not _internal(g.f_code):
                return g.f_code, g.f_lasti
    f, depth = sys._getframe(2), 2
    while f is not None:
        code = f.f_code
        if not _internal(code):
            _depth.setdefault(fn, depth - 1)
            return code, f.f_lasti
        f, depth = f.f_back, depth + 1
    return None
