"""The web UI against the stub server (recorded fixture trace), in headless Chromium.

These need neither the compiler nor the real server: they check that every pane fills from
the events of docs/events.md, that provenance links a source line to its FX nodes,
buffers, kernels and kernel lines and back, that errors, permalinks and the offline
fallbacks work.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from browser_support import REPO, LiveServer, page_errors, screenshot
from playwright.sync_api import Page, Route, expect
from stub_server import create_stub_app, load_fixture
from ui import (
    PANES,
    compile_and_wait,
    editor_line,
    highlighted_kernel_lines,
    hover_editor_line,
    kernel_sources,
    open_explorer,
    show_tab,
    trace_stages,
    wait_done,
    wait_panes_filled,
)

from kernelscope.compiler.events.stage import STAGES

pytestmark = pytest.mark.browser

GELU_LINE = 7  # `h = F.gelu(h, approximate="tanh")` in the fixture snippet
GELU_KERNEL = "cpp_poi_fused_gelu_1"
GELU_NODES = ["mul", "pow_1", "mul_1", "add", "mul_2", "tanh", "add_1", "mul_3"]


def compiled(page: Page) -> Page:
    open_explorer(page)
    compile_and_wait(page)
    wait_panes_filled(page)
    return page


def test_compile_fills_every_pane_and_the_status_strip(page: Page) -> None:
    open_explorer(page)
    expect(page.locator("#samples option")).to_have_count(8)
    compile_and_wait(page)
    wait_panes_filled(page)
    expect(page.locator(".stage.done")).to_have_count(9)
    expect(page.locator(".total")).to_contain_text("done")
    expect(page.locator(".source-info")).to_contain_text("block(x: float32[64, 128]")
    fixture = {
        k["name"]: k["source"]
        for g in load_fixture()["events"][5]["data"]["graphs"]
        for k in g["kernels"]
    }
    shown = kernel_sources(page)
    assert set(shown) == set(fixture)
    for name, source in fixture.items():
        assert [line.rstrip() for line in shown[name].split("\n")] == source.rstrip("\n").split(
            "\n"
        )
    expect(page.locator(".code-pane .code[data-highlight=pygments]")).to_have_count(4)
    screenshot(page, "stub-compiled")
    for tab in PANES[1:]:
        show_tab(page, tab)
        page.wait_for_timeout(150)
        screenshot(page, f"stub-{tab}")
    assert page_errors(page) == []


def test_cytoscape_falls_back_to_the_vendored_copy_offline(page: Page) -> None:
    compiled(page)
    show_tab(page, "graph")
    assert page.evaluate("window.kernelscope.libInfo.cytoscape") == "vendor"
    page.wait_for_function("""() => {
        const g = window.kernelscope.panes.find(p => p.id === 'graph');
        return g.fx && g.fx.nodes().length === 19 && g.kg && g.kg.nodes().length === 7; }""")
    expect(page.locator(".graph-pane canvas").first).to_be_visible()


def test_cytoscape_loads_from_the_cdn_when_it_answers(page: Page) -> None:
    vendored = (REPO / "webui" / "vendor" / "cytoscape.esm.min.js").read_bytes()
    served: list[str] = []

    def cdn(route: Route) -> None:
        served.append(route.request.url)
        route.fulfill(
            body=vendored,
            content_type="text/javascript",
            headers={"Access-Control-Allow-Origin": "*"},
        )

    page.route("https://cdn.jsdelivr.net/**", cdn)
    open_explorer(page)
    page.wait_for_function("window.kernelscope.libInfo.cytoscape !== null")
    assert page.evaluate("window.kernelscope.libInfo.cytoscape") == "cdn"
    assert served and served[0].endswith("/dist/cytoscape.esm.min.mjs")


def test_hovering_a_source_line_highlights_it_in_every_pane(page: Page) -> None:
    compiled(page)
    hover_editor_line(page, GELU_LINE)
    marked = highlighted_kernel_lines(page)
    # The gelu kernel's lines come from line 7, and so does its call in the wrapper.
    kernel_lines = [k for k in marked if not k.startswith("0:wrapper:")]
    assert kernel_lines and all(k.startswith(f"0:{GELU_KERNEL}:") for k in kernel_lines)
    assert [k for k in marked if k.startswith("0:wrapper:")] == ["0:wrapper:14"]
    expect(editor_line(page, GELU_LINE)).to_have_class(lambda_has("ks-hl"))
    graph = page.evaluate("window.kernelscope.panes.find(p => p.id === 'graph').highlighted()")
    assert sorted(graph) == sorted(GELU_NODES)
    expect(page.locator(".ir-card.hl")).to_have_count(1)
    expect(page.locator(".ir-card.hl")).to_have_attribute("data-buffer", "buf1")
    expect(page.locator(".fusion-pane tr.hl[data-kernel]")).to_have_count(1)
    expect(page.locator("svg.lifetimes g.mbar.hl")).to_have_count(1)
    show_tab(page, "ir")
    hover_editor_line(page, GELU_LINE)
    screenshot(page, "stub-provenance-source-line")
    page.mouse.move(5, 5)
    assert highlighted_kernel_lines(page) == []


def test_hovering_a_kernel_line_highlights_its_source_buffers_and_nodes(page: Page) -> None:
    compiled(page)
    # Line 22 of the reduction kernel: `auto tmp3 = tmp1 - tmp2;`, from `sub` on line 8.
    row = page.locator(".cl[data-key='0:cpp_red_fused__softmax_2:22']")
    expect(row).to_contain_text("tmp1 - tmp2")
    row.hover()
    expect(editor_line(page, 8)).to_have_class(lambda_has("ks-hl"))
    assert page.locator(".cm-line.ks-hl").count() == 1
    assert page.evaluate("window.kernelscope.panes.find(p => p.id === 'graph').highlighted()") == [
        "sub"
    ]
    expect(page.locator(".ir-card.hl")).to_have_attribute("data-buffer", "buf3")
    screenshot(page, "stub-provenance-kernel-line")


def test_clicking_a_source_line_pins_the_selection(page: Page) -> None:
    compiled(page)
    editor_line(page, 9).click()
    page.mouse.move(5, 5)
    marked = highlighted_kernel_lines(page)
    assert marked and all(
        k.startswith(("0:cpp_poi_fused__softmax_add_mul_3:", "0:wrapper:")) for k in marked
    )
    page.keyboard.press("Escape")
    assert highlighted_kernel_lines(page) == []


def test_clicking_an_fx_node_shows_its_details(page: Page) -> None:
    compiled(page)
    show_tab(page, "graph")
    page.wait_for_function("window.kernelscope.panes.find(p => p.id === 'graph').fx !== null")
    x, y = page.evaluate("""() => {
        const g = window.kernelscope.panes.find(p => p.id === 'graph');
        const pos = g.fx.$id('tanh').renderedPosition();
        const box = g.fxEl.getBoundingClientRect();
        return [box.left + pos.x, box.top + pos.y]; }""")
    page.mouse.click(x, y)
    details = page.locator(".graph-pane .details")
    expect(details).to_contain_text("aten.tanh.default")
    expect(details).to_contain_text("[64, 256]")
    expect(details).to_contain_text("float32")
    expect(details).to_contain_text('7: h = F.gelu(h, approximate="tanh")')
    expect(details).to_contain_text(GELU_KERNEL)
    page.mouse.move(5, 5)
    assert "0:cpp_poi_fused_gelu_1:16" in highlighted_kernel_lines(page)  # pinned


def test_an_exception_shows_the_banner_and_marks_the_line(page: Page) -> None:
    open_explorer(page)
    page.select_option("#samples", "raises")
    compile_and_wait(page)
    banner = page.locator(".error-banner")
    expect(banner).to_be_visible()
    expect(banner.locator(".error-kind")).to_have_text("exception")
    expect(banner).to_contain_text("RuntimeError: shape mismatch")
    expect(banner.locator(".error-line")).to_have_text("line 6")
    expect(page.locator(".cm-line.ks-err")).to_have_count(1)
    expect(editor_line(page, 6)).to_have_class(lambda_has("ks-err"))
    expect(page.locator(".stage[data-stage=capture]")).to_have_class(lambda_has("failed"))
    expect(page.locator(".total")).to_contain_text("failed")
    expect(page.locator(".stage[data-stage=source]")).to_have_class(lambda_has("done"))
    expect(page.locator("[data-pane=graph] .empty")).to_be_attached()
    screenshot(page, "stub-error")


def test_a_syntax_error_names_its_line(page: Page) -> None:
    open_explorer(page)
    page.select_option("#samples", "syntax_error")
    compile_and_wait(page)
    expect(page.locator(".error-kind")).to_have_text("syntax")
    expect(page.locator(".error-line")).to_have_text("line 5")
    expect(editor_line(page, 5)).to_have_class(lambda_has("ks-err"))


def test_share_then_the_permalink_replays_read_only(
    page: Page, new_page: Callable[[str], Page], stub: LiveServer
) -> None:
    compiled(page)
    before = kernel_sources(page)
    page.click("#share")
    link = page.locator("#permalink")
    expect(link).to_be_visible()
    url = link.input_value()
    assert url.startswith(f"{stub.url}/t/")
    fresh = new_page(stub.url)
    posts: list[str] = []
    fresh.on(
        "request",
        lambda r: (
            posts.append(r.url) if r.method == "POST" and r.url.endswith("/api/compile") else None
        ),
    )
    fresh.goto(url)
    fresh.wait_for_selector("body[data-ready=true]")
    wait_done(fresh)
    wait_panes_filled(fresh)
    assert kernel_sources(fresh) == before
    assert posts == []
    assert trace_stages(fresh) == trace_stages(page)
    expect(fresh.locator("#compile")).to_be_hidden()
    expect(fresh.locator(".cm-content")).to_have_attribute("contenteditable", "false")
    expect(fresh.locator("#permalink-info")).to_contain_text("Read-only trace")
    screenshot(fresh, "stub-permalink")
    fresh.click("#edit-copy")
    expect(fresh.locator(".cm-content")).to_have_attribute("contenteditable", "true")
    assert fresh.evaluate("location.pathname") == "/"


def test_an_unknown_permalink_says_so(page: Page) -> None:
    open_explorer(page, "/t/doesnotexist")
    expect(page.locator(".not-found-view")).to_contain_text("doesnotexist")


def test_code_stays_plain_text_when_highlighting_fails(new_page: Callable[[str], Page]) -> None:
    server = LiveServer(create_stub_app(highlight_fails=True))
    try:
        page = new_page(server.url)
        compiled(page)
        expect(page.locator(".code-pane .code[data-highlight=plain]")).to_have_count(4)
        assert "tmp1 - tmp2" in kernel_sources(page)["cpp_red_fused__softmax_2"]
    finally:
        server.close()


def test_unmeasured_profile_shows_its_reason(page: Page) -> None:
    open_explorer(page)
    page.select_option("#opt-device", "cuda")
    # The backend list is the server's (labels and all); "auto" leaves the choice to it.
    expect(page.locator("#opt-backend option")).to_have_text(["auto", "Triton", "C++"])
    assert page.input_value("#opt-backend") == "auto"
    page.select_option("#opt-backend", "triton")
    compile_and_wait(page)
    show_tab(page, "timings")
    # One notice of several (Inductor's own says whether it ran): the one with the reason.
    reason = page.locator(".timings-pane .notice").filter(has_text="TRITON_INTERPRET=1")
    expect(reason).to_have_count(1)


def test_the_fixture_follows_the_event_schema() -> None:
    events = load_fixture()["events"]
    assert [e["stage"] for e in events] == [*STAGES, "done"]
    assert [e["seq"] for e in events] == list(range(len(events)))
    graph = events[5]["data"]["graphs"][0]
    for kernel in graph["kernels"]:
        lines = kernel["source"].count("\n")
        assert all(1 <= e["line"] <= lines for e in kernel["line_map"])
    assert json.loads(Path(REPO / "tests/browser/fixtures/softmax_block.json").read_text())


def lambda_has(cls: str) -> re.Pattern[str]:
    """A pattern for expect().to_have_class: the class list contains `cls`."""
    return re.compile(rf"(^|\s){re.escape(cls)}(\s|$)")


@pytest.mark.parametrize("status", [400, 413])
def test_a_refused_compile_stops_the_clock(page: Page, status: int) -> None:
    """A 400 or 413 from /api/compile: no event ever comes, and the status strip's clock
    used to count on forever."""
    open_explorer(page)
    page.route("**/api/compile", lambda route: route.fulfill(
        status=status, json={"error": "the snippet is over the size limit"}))
    page.click("#compile")
    expect(page.locator(".error-banner")).to_be_visible()
    total = page.locator(".total")
    expect(total).to_contain_text("refused after")
    expect(total).to_have_class(re.compile(r"\bbad\b"))
    shown = total.text_content()
    page.wait_for_timeout(400)  # four ticks of a running clock
    assert total.text_content() == shown
    expect(page.locator("#compile")).to_be_enabled()


def test_a_long_stage_shows_what_it_does(page: Page) -> None:
    """A stage that runs long (a model's capture, a g++ build) left the strip a bare
    clock; its `progress` event now says what it does, until the stage's own event."""
    page.request.post("/stub/progress/on")
    page.request.post("/stub/hold/lowering")
    try:
        open_explorer(page)
        page.click("#compile")
        expect(page.locator(".total")).to_contain_text("lowering: graph 0 [0/1] (0.5 s)")
    finally:
        page.request.post("/stub/progress/off")
        page.request.post("/stub/release")
    wait_done(page)
    expect(page.locator(".total")).not_to_contain_text("lowering: graph 0")


def test_a_queued_job_shows_what_it_waits_on(page: Page) -> None:
    """A job queued behind busy slots: the status strip showed a bare running clock; now
    the server's `waiting` event names what it waits on, until the job's first stage."""
    page.request.post("/stub/queued/on")
    page.request.post("/stub/hold/source")
    try:
        open_explorer(page)
        page.click("#compile")
        expect(page.locator(".total")).to_contain_text(
            "waiting for a worker: 2 busy, you are 1st")
    finally:
        page.request.post("/stub/queued/off")
        page.request.post("/stub/release")
    wait_done(page)
    expect(page.locator(".total")).not_to_contain_text("waiting")
