"""The web UI under the server's real Content-Security-Policy, in headless Chromium.

tests/browser runs with Playwright's CSP bypass (its wait_for_function uses eval); this
checks that the page itself needs nothing the policy forbids: no violation is reported,
the explorer starts, the vendored cytoscape loads when the CDN is unreachable, and a CDN
answer whose bytes do not match the pinned integrity hash is refused.
"""

from __future__ import annotations

from typing import Any

import pytest
from live_support import LiveServer
from server_support import REPO, AppFactory

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.browser
WATCH = """
window.__csp = [];
document.addEventListener("securitypolicyviolation",
  (e) => window.__csp.push(`${e.violatedDirective} ${e.blockedURI}`));
"""


def open_page(chromium: Any, url: str, cdn_body: bytes | None, path: str = "/") -> Any:
    context = chromium.new_context()
    context.add_init_script(WATCH)

    def route(r: Any) -> None:
        if r.request.url.startswith(url):
            r.continue_()
        elif cdn_body is not None and "cdn.jsdelivr.net" in r.request.url:
            r.fulfill(body=cdn_body, content_type="text/javascript",
                      headers={"Access-Control-Allow-Origin": "*"})
        else:
            r.abort()

    context.route("**/*", route)
    page = context.new_page()
    page.goto(url + path)
    return page


def lib_source(page: Any) -> str:
    for _ in range(200):
        found = page.evaluate("window.kernelscope && window.kernelscope.libInfo.cytoscape")
        if found:
            return str(found)
        page.wait_for_timeout(100)
    raise AssertionError("cytoscape never loaded")


@pytest.mark.parametrize("cdn", ["offline", "genuine", "tampered"])
def test_the_page_runs_under_its_csp(make_app: AppFactory, browser: Any, cdn: str) -> None:
    server = LiveServer(make_app())
    try:
        vendored = (REPO / "webui" / "vendor" / "cytoscape.esm.min.js").read_bytes()
        body = {"offline": None, "genuine": vendored, "tampered": vendored + b"\n//x"}[cdn]
        page = open_page(browser, server.url, body)
        for _ in range(300):  # main.js loads its modules and the API's answers first
            if page.evaluate("typeof window.kernelscope") == "object":
                break
            page.wait_for_timeout(100)
        assert page.evaluate("typeof window.kernelscope") == "object", "main.js did not run"
        source = lib_source(page)
        assert source == ("cdn" if cdn == "genuine" else "vendor"), source
        assert page.evaluate("window.__csp") == []
        page.context.close()
    finally:
        server.close()


def test_a_permalink_fetches_its_modules_and_trace_from_the_page_head(
    make_app: AppFactory, browser: Any
) -> None:
    """Every module main.js loads, and the permalink's trace, are asked for by the page's
    `<link>` preloads (server/web/preload.py), under the CSP; the page's own fetch of the
    trace takes the preloaded answer instead of asking again."""
    import json

    from kernelscope.server.state import of
    from kernelscope.server.web.preload import module_closure

    app = make_app()
    trace = json.loads((REPO / "tests" / "browser" / "fixtures" / "softmax_block.json").read_text())
    trace_id = of(app).store.put(trace["code"], trace.get("options", {}), trace["events"], True)
    server = LiveServer(app)
    try:
        page = open_page(browser, server.url, None, f"/t/{trace_id}")
        page.wait_for_selector("[data-pane=code][data-filled=true]", timeout=30_000)
        entries = page.evaluate("""performance.getEntriesByType('resource').map((e) =>
          [new URL(e.name).pathname, e.initiatorType, e.startTime, e.responseEnd])""")
        # Each preloaded answer is fetched once, by its link: the page's fetch takes it.
        for url in (f"/api/traces/{trace_id}", "/api/schema", "/api/samples", "/api/options"):
            assert [kind for path, kind, _, _ in entries if path == url] == ["link"], (url, entries)
        # Without the preloads a module is asked for only once the one importing it has
        # arrived: every module asked for before main.js arrived came from the head.
        started = {path: start for path, _, start, _ in entries if path.startswith("/webui/")}
        main_end = next(end for path, _, _, end in entries if path == "/webui/js/main.js")
        for module in module_closure(REPO / "webui"):
            assert started[f"/webui/{module}"] <= main_end, (module, started, main_end)
        assert page.evaluate("window.__csp") == []
        page.context.close()
    finally:
        server.close()
