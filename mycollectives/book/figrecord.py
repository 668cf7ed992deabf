"""Every PNG a notebook saves records the smallest font it was drawn with.

The book's browser test (``tests/test_browser.py``) checks that no figure's
text shows under 9 px at a 1280 px window. How large a figure's text shows
depends on two things: the font sizes it was drawn with, which only
matplotlib knows, and how much the page scales the image down, which only
the browser knows. So each PNG carries the first half with it: in a notebook
kernel, ``import mycollectives`` calls :func:`install`, after which every PNG
matplotlib writes (``plt.show()``'s inline figures, the frames of an
animation's ``to_jshtml``, any ``savefig``) holds two text chunks,
``mycollectives:min_font_pt`` (the smallest font of any text actually drawn,
in points) and ``mycollectives:dpi``. :func:`read_record` reads them back;
the test multiplies ``pt * dpi / 72`` (pixels in the image) by the image's
displayed width over its natural width.

A figure drawn some other way (an image file, a PNG made without this
hook) has no record, and the test reports it rather than guessing.

>>> import matplotlib
>>> matplotlib.use("Agg")
>>> import io, matplotlib.pyplot as plt
>>> fig, ax = plt.subplots(figsize=(3, 2), dpi=100)
>>> _ = ax.plot([0, 1], label="a line"); _ = ax.legend(fontsize=6)
>>> smallest_font_pt(fig)
6.0
>>> undo = install()
>>> buf = io.BytesIO(); fig.savefig(buf, format="png"); plt.close(fig); undo()
>>> read_record(buf.getvalue())
{'min_font_pt': 6.0, 'dpi': 100.0}
"""

from __future__ import annotations

import struct
import sys
import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.figure import Figure

KEY_PT = "mycollectives:min_font_pt"
KEY_DPI = "mycollectives:dpi"
_PNG = b"\x89PNG\r\n\x1a\n"


def smallest_font_pt(fig: Figure) -> float | None:
    """The smallest font size (points) of any non-empty text a draw of ``fig`` renders.

    Draws the figure once on a renderer that records every ``draw_text`` and
    ``draw_tex`` call and paints nothing, so hidden artists (an axis turned
    off, a tick outside the view) do not count. ``None`` for a figure with
    no text.
    """
    from matplotlib.backend_bases import RendererBase
    from matplotlib.backends.backend_agg import RendererAgg

    w, h = fig.bbox.size
    renderer = RendererAgg(max(int(w), 1), max(int(h), 1), fig.dpi)
    sizes: list[float] = []

    def record(gc, x, y, s, prop, angle, *args, **kwargs) -> None:
        if str(s).strip():
            sizes.append(float(prop.get_size_in_points()))

    for name in dir(RendererBase):
        if name.startswith("draw_"):
            setattr(renderer, name, lambda *args, **kwargs: None)
    renderer.draw_text = record
    renderer.draw_tex = record
    fig.draw(renderer)
    return min(sizes) if sizes else None


def install() -> Callable[[], None]:
    """Make every PNG matplotlib's Agg canvas writes carry its font record.

    Idempotent; returns a function that undoes it (a no-op when it was
    installed already).
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    original = FigureCanvasAgg.print_png
    if getattr(original, "_records_fonts", False):
        return lambda: None

    # print_figure hands a method outside matplotlib's own modules every option
    # (dpi, facecolor, ...); it has applied them to the figure already, and
    # matplotlib drops them for its own print_png, so this one does too.
    def print_png(self, filename_or_obj, *, metadata=None, pil_kwargs=None, **_applied):
        pt = smallest_font_pt(self.figure)
        record = {KEY_PT: "none" if pt is None else f"{pt:g}", KEY_DPI: f"{self.figure.dpi:g}"}
        return original(self, filename_or_obj, metadata={**record, **(metadata or {})}, pil_kwargs=pil_kwargs)

    print_png._records_fonts = True
    print_png.__doc__ = original.__doc__
    FigureCanvasAgg.print_png = print_png

    def undo() -> None:
        FigureCanvasAgg.print_png = original

    return undo


def install_in_notebook() -> None:
    """:func:`install` when running in an IPython kernel (where the book's pages run); else nothing."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is not None and getattr(shell, "kernel", None) is not None:
        install()


def read_record(png: bytes) -> dict[str, float | None] | None:
    """The record in a PNG's text chunks: ``{"min_font_pt": pt or None, "dpi": dpi}``; None without one."""
    if not png.startswith(_PNG):
        return None
    texts: dict[str, str] = {}
    pos = len(_PNG)
    while pos + 8 <= len(png):
        length, kind = struct.unpack(">I4s", png[pos : pos + 8])
        data = png[pos + 8 : pos + 8 + length]
        if kind == b"tEXt":
            key, _, value = data.partition(b"\0")
            texts[key.decode("latin-1")] = value.decode("latin-1")
        elif kind == b"zTXt":
            key, _, rest = data.partition(b"\0")
            texts[key.decode("latin-1")] = zlib.decompress(rest[1:]).decode("latin-1")
        pos += 12 + length
    if KEY_PT not in texts or KEY_DPI not in texts:
        return None
    pt = texts[KEY_PT]
    return {"min_font_pt": None if pt == "none" else float(pt), "dpi": float(texts[KEY_DPI])}


__all__ = ["KEY_DPI", "KEY_PT", "install", "install_in_notebook", "read_record", "smallest_font_pt"]
