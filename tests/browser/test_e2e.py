"""End to end in a real browser against the real server and compiler.

Starts `server.create_app` on a temporary database (werkzeug on 127.0.0.1, in a thread),
loads the page, picks the GELU sample, compiles it on cpu with the C++ backend, waits for
every pane, hovers a source line and checks that kernel lines light up, clicks Share and
opens the permalink in a fresh page, which must show the same kernel source without
compiling again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from browser_support import REPO, LiveServer, page_errors, screenshot
from playwright.sync_api import Page, expect
from ui import (
    PANES,
    highlighted_kernel_lines,
    hover_editor_line,
    kernel_sources,
    open_explorer,
    show_tab,
    wait_done,
    wait_panes_filled,
)

pytestmark = pytest.mark.browser

COMPILE_TIMEOUT_S = 240


@pytest.fixture
def real_server(tmp_path: Path) -> Iterator[LiveServer]:
    try:
        from server import create_app
    except ImportError as e:
        pytest.skip(f"the server is not importable yet ({e})")
    if not (REPO / "compiler" / "__main__.py").exists():
        pytest.skip("the compiler CLI (python -m compiler) does not exist yet")
    app = create_app(
        {
            "DATABASE": str(tmp_path / "traces.sqlite3"),
            "JOB_TIMEOUT_S": COMPILE_TIMEOUT_S,
            "SCRATCH_ROOT": str(tmp_path),
        }
    )
    server = LiveServer(app)
    yield server
    server.close()
    state = app.extensions.get("kernelscope")
    if state is not None:
        state.jobs.shutdown()


def pick_sample(page: Page) -> str:
    names = page.eval_on_selector_all(
        "#samples option[value]:not([value=''])", "opts => opts.map(o => o.value)"
    )
    assert names, "the server offers no samples"
    name = "gelu_tanh" if "gelu_tanh" in names else names[0]
    page.select_option("#samples", name)
    return name


def test_compile_hover_share_and_reopen(
    new_page: Callable[[str], Page], real_server: LiveServer
) -> None:
    page = new_page(real_server.url)
    open_explorer(page)
    sample = pick_sample(page)
    page.select_option("#opt-device", "cpu")
    page.select_option("#opt-backend", "cpp")
    page.click("#compile")
    wait_done(page, COMPILE_TIMEOUT_S)
    screenshot(page, "e2e-compiled")
    error = page.evaluate("window.kernelscope.state.trace.error")
    assert error is None, f"{sample} failed: {error}"
    wait_panes_filled(page, PANES)
    expect(page.locator(".stage.done")).to_have_count(9)

    # A source line that produced code lights up kernel lines.
    lines = page.evaluate("[...window.kernelscope.state.index.sourceLines].sort((a, b) => a - b)")
    assert lines, "no source line maps to generated code"
    hover_editor_line(page, lines[0])
    marked = highlighted_kernel_lines(page)
    assert any(key.split(":")[1] != "wrapper" for key in marked), marked
    show_tab(page, "graph")
    hover_editor_line(page, lines[0])
    screenshot(page, "e2e-provenance")
    for tab in PANES[2:]:
        show_tab(page, tab)
        screenshot(page, f"e2e-{tab}")

    source = kernel_sources(page)
    assert source
    page.click("#share")
    url = page.locator("#permalink").input_value()
    assert "/t/" in url

    fresh = new_page(real_server.url)
    compiles: list[str] = []
    fresh.on(
        "request",
        lambda r: (
            compiles.append(r.url)
            if r.method == "POST" and r.url.endswith("/api/compile")
            else None
        ),
    )
    fresh.goto(url)
    fresh.wait_for_selector("body[data-ready=true]")
    wait_done(fresh)
    wait_panes_filled(fresh, PANES)
    assert kernel_sources(fresh) == source
    assert compiles == []
    expect(fresh.locator(".cm-content")).to_have_attribute("contenteditable", "false")
    screenshot(fresh, "e2e-permalink")
    assert page_errors(page) == []
    assert page_errors(fresh) == []
