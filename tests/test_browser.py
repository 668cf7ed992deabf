"""Every page of the built book in a real browser (headless Chromium).

Serves _build/html on localhost and opens each page: no console errors, no
failed or off-machine requests (the book must work offline), math rendered
by MathJax, every image loaded, and every animation advancing when its
"next frame" button is clicked. Screenshots of failing pages are kept in
_build/browser-failures/.

Needs Debian's ``chromium`` and the ``playwright`` Python package (never
``playwright install``: its browser download is not used). Locally, without
them, the test skips and says why; in CI (``CI=true``) that is a failure.
Build the book first (``make book``; ``make test`` does).
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser
ROOT = Path(__file__).resolve().parents[1]
HTML = ROOT / "_build" / "html"
SHOTS = ROOT / "_build" / "browser-failures"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SKIP_DIRS = {"_static", "_sources", "_images", "reports", "_sphinx_design_static"}
# Pages that are notebooks must show at least one figure.
NOTEBOOK_PAGES = ("intro.html", "chapters/", "labs/")


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"in CI the browser test must run: {reason}")
    pytest.skip(reason)


def _pages() -> list[str]:
    if not (HTML / "intro.html").exists():
        return []
    pages = [p.relative_to(HTML).as_posix() for p in HTML.rglob("*.html")]
    # index.html only redirects to the root page
    return sorted(p for p in pages if p.split("/")[0] not in SKIP_DIRS and p != "index.html")


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    if not (HTML / "intro.html").exists():
        _unavailable("the book is not built: run `make book` first")
    handler = functools.partial(_Quiet, directory=str(HTML))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    if CHROMIUM is None:
        _unavailable("no chromium on PATH (Debian: apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("the playwright Python package is not installed (pip install -e .[test])")
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        yield b
        b.close()


def _check_page(page: object, url: str, origin: str) -> list[str]:
    problems: list[str] = []
    page.on("console", lambda m: m.type == "error" and problems.append(f"console error: {m.text}"))
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url} ({r.failure})"))

    def offline(route: object) -> None:
        if route.request.url.startswith(origin) or route.request.url.startswith("data:"):
            route.continue_()
        else:
            problems.append(f"request leaves the machine: {route.request.url}")
            route.abort()

    page.route("**/*", offline)
    page.goto(url, wait_until="load", timeout=30_000)
    if page.locator(".math").count():
        page.wait_for_function(
            "() => window.MathJax && MathJax.startup && MathJax.startup.promise", timeout=20_000
        )
        page.evaluate("() => MathJax.startup.promise")
        rendered = page.locator("mjx-container").count()
        if rendered < page.locator(".math").count():
            problems.append(f"math: {rendered} rendered of {page.locator('.math').count()}")
        if page.locator("mjx-merror").count():
            problems.append("math: MathJax reported an error")
    broken = page.evaluate(
        "() => [...document.images].filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src.slice(0, 80))"
    )
    problems += [f"image not loaded: {src}" for src in broken]
    return problems


def _advance_animations(page: object) -> list[str]:
    problems = []
    for anim in page.locator("div.animation").all():
        img = anim.locator("img")
        anim.locator('button[title="Pause"]').click()
        before = img.get_attribute("src")
        anim.locator('button[title="Next frame"]').click()
        page.wait_for_timeout(200)
        if not before or img.get_attribute("src") == before:
            problems.append("animation did not advance on 'Next frame'")
    return problems


def test_book_is_built_with_every_page():
    pages = _pages()
    if not pages:
        _unavailable("the book is not built: run `make book` first")
    assert "intro.html" in pages
    assert any(p.startswith("chapters/") for p in pages) and any(p.startswith("labs/") for p in pages)


@pytest.mark.timeout(600)
def test_every_page_in_chromium(server: str, browser: object):
    pages = _pages()
    failures: dict[str, list[str]] = {}
    animations = 0
    for name in pages:
        page = browser.new_page()
        try:
            problems = _check_page(page, f"{server}/{name}", server)
            if name.startswith(NOTEBOOK_PAGES) and not page.locator("img").count():
                problems.append("no figure on a notebook page")
            animations += page.locator("div.animation").count()
            problems += _advance_animations(page)
            if problems:
                SHOTS.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(SHOTS / (name.replace("/", "__") + ".png")), full_page=True)
                failures[name] = problems
        finally:
            page.close()
    assert animations > 0, "the book should contain at least one animation"
    assert not failures, f"screenshots in {SHOTS}:\n" + "\n".join(f"{k}: {v}" for k, v in failures.items())
