"""Fixtures for the web UI's browser tests: headless Debian Chromium through Playwright
(the session's one browser is `browser` in tests/conftest.py).

Every page runs offline: requests to any host but the test server are aborted, so the
cytoscape CDN always fails and the vendored fallback is what the tests exercise (one test
serves the CDN URL itself to check the other path). Screenshots go to
artifacts/screenshots/ (gitignored).
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

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


class LiveServer:
    """A WSGI app served on 127.0.0.1 from a background thread."""

    def __init__(self, app: Any) -> None:
        from werkzeug.serving import make_server

        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        self.server = make_server("127.0.0.1", 0, app, threaded=True)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.thread.join(timeout=5)


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
