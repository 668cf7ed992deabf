"""Sphinx fixes for this book's build (loaded via _config.yml local_extensions).

sphinx-thebe registers its inline configuration script on every
``env-before-read-docs`` event, and Jupyter Book's build fires that event
more than once, so pages declared ``const THEBE_JS_URL`` twice: a
SyntaxError in every page's console. Each page keeps one copy of each script.
"""

from __future__ import annotations

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


def setup(app: Any) -> dict[str, Any]:
    app.connect("html-page-context", _dedupe_scripts, priority=999)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
