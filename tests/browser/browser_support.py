"""Fixtures for the web UI's browser tests: headless Debian Chromium through Playwright
(the session's one browser is `browser` in tests/conftest.py).

Every page runs offline: requests to any host but the test server are aborted, so the
cytoscape CDN always fails and the vendored fallback is what the tests exercise (one test
serves the CDN URL itself to check the other path). Screenshots go to
artifacts/screenshots/ (gitignored).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from live_support import LiveServer

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
SCREENSHOTS = REPO / "artifacts" / "screenshots"
VIEWPORT_SIZE = (1600, 950)

for path in (HERE, REPO):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

try:
    from playwright.sync_api import Browser, BrowserContext, Page, ViewportSize

    HAVE_PLAYWRIGHT = True
except ImportError:  # the tests skip with a reason below
    HAVE_PLAYWRIGHT = False

# Uncaught errors and rejected promises on a page, read back by page_errors().
CATCH_ERRORS = """
window.__errors = [];
addEventListener("error", (e) => window.__errors.push(String(e.message)));
addEventListener("unhandledrejection", (e) => window.__errors.push(String(e.reason)));
"""


# For pages that open stored or uploaded traces: no warm workers, no kernel cache (a job, if
# one runs, starts cold).
STORED_ONLY = {"WARM_POOL": 0, "KERNEL_CACHE": ""}


@contextmanager
def live_app(folder: Path, **config: Any) -> Iterator[LiveServer]:
    """The real app (kernelscope.server.create_app) on a database and scratch root in
    `folder`, with `config` on top, served on 127.0.0.1; its jobs are shut down after."""
    from kernelscope.server import create_app

    app = create_app({"DATABASE": str(folder / "traces.sqlite3"), "SCRATCH_ROOT": str(folder),
                      **config})
    live = LiveServer(app)
    try:
        yield live
    finally:
        live.close()
        app.extensions["kernelscope"].jobs.shutdown()


@pytest.fixture
def live_server(tmp_path: Path) -> Iterator[LiveServer]:
    """The real app for a test's stored and uploaded traces (`STORED_ONLY`)."""
    with live_app(tmp_path, **STORED_ONLY) as live:
        yield live


@pytest.fixture(scope="session")
def stub() -> Iterator[LiveServer]:
    from stub_server import create_stub_app

    server = LiveServer(create_stub_app())
    yield server
    server.close()


def offline_context(browser: Browser, base_url: str) -> BrowserContext:
    """A context that reaches only `base_url`: every other request is aborted."""
    width, height = VIEWPORT_SIZE
    # bypass_csp: Playwright's wait_for_function evaluates its predicate with eval(), which
    # the real server's Content-Security-Policy forbids (tests/server checks the page under it).
    context = browser.new_context(
        viewport=ViewportSize(width=width, height=height), base_url=base_url, bypass_csp=True
    )
    context.add_init_script(CATCH_ERRORS)
    context.route(
        "**/*",
        lambda route: (
            route.continue_() if route.request.url.startswith(base_url) else route.abort()
        ),
    )
    return context


@pytest.fixture
def new_page(browser: Browser) -> Iterator[Callable[[str], Page]]:
    """new_page(base_url) opens a fresh offline page."""
    contexts: list[BrowserContext] = []

    def make(base_url: str) -> Page:
        context = offline_context(browser, base_url)
        contexts.append(context)
        return context.new_page()

    yield make
    for context in contexts:
        context.close()


@pytest.fixture
def page(new_page: Callable[[str], Page], stub: LiveServer) -> Page:
    return new_page(stub.url)


def page_errors(page: Page) -> list[str]:
    """Uncaught errors on the page so far."""
    errors: list[str] = page.evaluate("window.__errors")
    return errors


def screenshot(page: Page, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path))
    return path
