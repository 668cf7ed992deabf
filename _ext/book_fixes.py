"""Sphinx fixes for this book's build (loaded via _config.yml local_extensions).

sphinx-thebe registers its inline configuration script on every
``env-before-read-docs`` event, and Jupyter Book's build fires that event
more than once, so pages declared ``const THEBE_JS_URL`` twice: a
SyntaxError in every page's console. Each page keeps one copy of each script.

MyST-NB's ``nb_merge_streams`` merges a cell's stream outputs for the page by
appending to the first output in place (``myst_nb.core.utils.coalesce_streams``),
and the same notebook is then written to ``_build/jupyter_execute``: the first
stream holds every line and the later ones repeat them. How many later ones
there are depends on when the kernel flushed, so the executed notebook (which
``tests/outputs.py`` compares, as nbval does) differed from build to build.
The merge here works on a copy; the executed notebook keeps what the kernel sent.
"""

from __future__ import annotations

import copy
from typing import Any


def _dedupe_scripts(app: Any, pagename: str, templatename: str, context: dict, doctree: Any) -> None:
    seen: set[tuple[str, str | None]] = set()
    unique = []
    for script in context.get("script_files", []):
        body = getattr(script, "attributes", {}).get("body")
        key = ("body", body) if body else ("file", str(getattr(script, "filename", script)))
        if key not in seen:
            seen.add(key)
            unique.append(script)
    context["script_files"] = unique


def _merge_streams_on_a_copy() -> None:
    try:
        from myst_nb.core import render
    except ImportError:  # another MyST-NB layout
        return
    merge = render.coalesce_streams
    if getattr(merge, "_copies", False):
        return

    def merged_copy(outputs: list) -> list:
        return merge(copy.deepcopy(outputs))

    merged_copy._copies = True  # type: ignore[attr-defined]
    render.coalesce_streams = merged_copy


def setup(app: Any) -> dict[str, Any]:
    _merge_streams_on_a_copy()
    app.connect("html-page-context", _dedupe_scripts, priority=999)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
