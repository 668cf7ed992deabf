"""Live mode as the README gives it (``make lab``): JupyterLab opens a page of
the book as a notebook, its kernel imports the package, and the step-through
widget draws and redraws when its slider moves.

Starts the venv's ``jupyter lab`` with the settings ``make lab`` installs,
on a free local port, and drives it with headless Chromium. Needs the
``lab`` extra (``make lab`` or ``make test`` installs it), Debian's
``chromium`` and ``playwright``; without them it skips locally and fails in
CI (``CI=true``), like the browser test.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]
ROOT = Path(__file__).resolve().parents[1]
JUPYTER = Path(sys.executable).parent / "jupyter"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
PAGE = "chapters/02_primitives.md"
CELL = (
    "from mycollectives.algorithms import schedule_for\n"
    "from mycollectives.viz import step_through\n"
    'step_through(schedule_for("all_reduce", "ring", 4, 64))'
)


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"in CI the live-mode test must run: {reason}")
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> str:
    """A JupyterLab server over a copy of the page, configured as ``make lab`` configures it."""
    try:
        import jupyterlab  # noqa: F401
        import jupytext  # noqa: F401
    except ImportError:
        _unavailable("the lab extra is not installed (make lab, or pip install -e .[lab])")
    settings = Path(sys.prefix) / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
    wanted = json.loads((ROOT / "tools" / "lab_settings.json").read_text())
    if not settings.exists() or json.loads(settings.read_text()) != wanted:
        _unavailable(f"{settings} is not tools/lab_settings.json: run make lab once")
    home = tmp_path_factory.mktemp("jupyter")
    book = home / "book"  # a copy of the page: the lab saves what the test types, never into the repository
    (book / Path(PAGE).parent).mkdir(parents=True)
    shutil.copy(ROOT / PAGE, book / PAGE)
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(home / "config"), JUPYTER_RUNTIME_DIR=str(home / "runtime"))
    port = _free_port()
    cmd = [str(JUPYTER), "lab", "--no-browser", f"--port={port}", "--IdentityProvider.token=live"]
    cmd += [f"--notebook-dir={book}", "--allow-root", "--ServerApp.open_browser=False"]
    log = open(home / "lab.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                log.close()
                pytest.fail(f"jupyter lab did not start: {(home / 'lab.log').read_text()[-2000:]}")
            time.sleep(0.5)
    yield f"http://127.0.0.1:{port}"
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


def test_a_page_opens_as_a_notebook_and_the_step_through_widget_works(lab: str):
    if CHROMIUM is None:
        _unavailable("no chromium on PATH (Debian: apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("the playwright Python package is not installed (pip install -e .[test])")
    errors: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.on("console", lambda m: m.type == "error" and errors.append(m.text))
        page.on("pageerror", lambda e: errors.append(str(e)))
        try:
            page.goto(f"{lab}/lab/tree/{PAGE}?token=live", timeout=120_000)
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=180_000)
            # a markdown page opened as a notebook: its code cells are there
            page.wait_for_function(
                "document.querySelectorAll('.jp-Notebook .jp-CodeCell').length > 5", timeout=60_000
            )
            page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=180_000)
            # the status bar says "| Idle" once the page's own connection to the kernel has heard from it
            # (a cell run before that is dropped, not queued)
            page.wait_for_function(
                "(document.querySelector('#jp-main-statusbar') || {innerText: ''}).innerText.includes('| Idle')",
                timeout=180_000,
            )
            page.locator(".jp-Notebook .jp-Cell").first.click()
            page.keyboard.press("Escape")
            page.keyboard.press("a")  # a new cell above the first
            page.keyboard.press("Enter")
            page.keyboard.type(CELL)
            page.keyboard.press("Escape")  # command mode: no completer or tooltip takes the key
            page.keyboard.press("Shift+Enter")
            slider = page.locator(".widget-slider").first
            slider.wait_for(timeout=180_000)
            images = page.locator(".jp-OutputArea-output img")
            images.first.wait_for(timeout=180_000)  # matplotlib on a loaded machine
            before = images.first.get_attribute("src")
            slider.locator(".noUi-handle, .ui-slider-handle").first.focus()
            page.keyboard.press("ArrowRight")
            page.wait_for_function(
                "src => { const i = document.querySelector('.jp-OutputArea-output img');"
                " return i && i.src !== src; }",
                arg=before,
                timeout=60_000,
            )
        except Exception:
            page.screenshot(path=str(ROOT / "_build" / "lab-failure.png"))
            raise
        finally:
            browser.close()
    assert not errors, errors
