"""The explorer's views beyond the basic panes, against the stub server and the traces the
compiler recorded (fixtures/record_fixtures.py): training graphs, guards and recompiles, the
diff view, options as controls, stale results, Cancel, the snippet's output, layout,
themes, keyboard provenance, not-found pages and what the figures say."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import pytest
from browser_support import LiveServer, page_errors, screenshot
from playwright.sync_api import Page, Request, expect
from stub_server import load_fixture
from ui import (
    compile_and_wait,
    editor_line,
    highlighted_kernel_lines,
    hover_editor_line,
    kernel_sources,
    open_backward_graph,
    open_explorer,
    show_tab,
    turn_on_inductor,
    wait_done,
    wait_panes_filled,
)

pytestmark = pytest.mark.browser


def compile_sample(page: Page, sample: str) -> None:
    open_explorer(page)
    page.select_option("#samples", sample)
    compile_and_wait(page)


def has_class(name: str) -> re.Pattern[str]:
    return re.compile(rf"(^|\s){re.escape(name)}(\s|$)")


def fixture_stage(name: str, stage: str) -> dict:
    return next(e["data"] for e in load_fixture(name)["events"] if e["stage"] == stage)


# -- training ---------------------------------------------------------------------------
def test_training_shows_forward_and_backward_as_tabs_with_saved_activations(page: Page) -> None:
    compile_sample(page, "training")
    wait_panes_filled(page, ["code", "graph", "memory"])
    tabs = page.locator(".graph-tabs .gtab")
    expect(tabs).to_have_text(["all", "forward 0", "backward 1"])
    codegen = fixture_stage("training", "codegen")["graphs"]
    forward = {k["name"] for k in codegen[0]["kernels"]}
    backward = {k["name"] for k in codegen[1]["kernels"]}
    assert forward and backward and not forward & backward
    assert set(kernel_sources(page)) == forward | backward

    open_backward_graph(page, backward)
    expect(page.locator(".code-pane .wrapper .kname")).to_have_text("wrapper · graph 1")
    screenshot(page, "training-backward")

    page.click(".gtab[data-graphs='0']")
    assert set(kernel_sources(page)) == forward
    show_tab(page, "memory")
    saved = page.locator(".saved-acts")
    expect(saved).to_contain_text("Saved for backward: 3 tensors")
    expect(saved.locator("tr[data-saved=tanh]")).to_contain_text("buf1")
    expect(saved.locator("tr[data-saved=primals_1]")).to_contain_text("graph input")
    expect(page.locator("svg.lifetimes g.mbar.saved")).to_have_count(2)
    screenshot(page, "training-saved")
    page.click(".gtab[data-graphs='all']")
    assert set(kernel_sources(page)) == forward | backward
    assert page_errors(page) == []


# -- guards and recompiles --------------------------------------------------------------
def test_every_recompile_is_listed_with_dynamos_reason(page: Page) -> None:
    compile_sample(page, "recompiles")
    show_tab(page, "guards")
    cards = page.locator(".compile-card")
    expect(cards).to_have_count(4)
    expect(page.locator(".guards-pane h3").first).to_contain_text("4 Dynamo compiles")
    expect(cards.nth(0).locator(".badge").first).to_have_text("first compile")
    for i in (1, 2, 3):
        expect(cards.nth(i).locator(".compile-head .badge")).to_have_text("recompile")
    expect(cards.nth(1).locator(".reasons")).to_contain_text(
        "tensor 'x' size mismatch at index 0. expected 16, actual 32"
    )
    expect(cards.nth(2).locator(".reasons")).to_contain_text("rank mismatch")
    expect(cards.nth(3).locator(".reasons")).to_contain_text("GLOBAL_STATE changed: grad_mode")
    expect(cards.nth(3).locator(".compile-head")).to_contain_text("grad off")
    expect(cards.nth(0)).to_contain_text("x: Tensor float32[16], stride [1]")
    expect(cards.nth(1)).to_contain_text("2 <= x.size()[0]")
    # A guard's line chip selects that source line everywhere.
    cards.nth(0).locator("tr", has_text="TENSOR_MATCH").locator(".line-chip").click()
    expect(editor_line(page, 5)).to_have_class(has_class("ks-hl"))
    assert highlighted_kernel_lines(page)
    screenshot(page, "guards-recompiles")


def test_each_recompile_has_its_own_compiled_graph(page: Page) -> None:
    """Every call's compile goes down the pipeline: the card of a recompile shows its graph,
    and that graph has kernels of its own, generated for the call's sizes."""
    compile_sample(page, "recompiles")
    expect(page.locator(".graph-tabs .gtab")).to_have_text(
        ["all", "inference 0", "inference 1", "inference 2", "inference 3"]
    )
    codegen = fixture_stage("recompiles", "codegen")["graphs"]
    assert [g["id"] for g in codegen] == [0, 1, 2, 3]
    show_tab(page, "guards")
    card = page.locator(".compile-card[data-compile='0/1']")
    expect(card.locator(".compile-graphs .gtab")).to_have_text(["inference 1"])
    card.locator(".compile-graphs .gtab").click()
    expect(page.locator(".graph-tabs .gtab.active")).to_have_text("inference 1")
    assert set(kernel_sources(page)) == {k["name"] for k in codegen[1]["kernels"]}
    lowering = fixture_stage("recompiles", "lowering")["graphs"][1]
    assert any("specialised to the sizes" in n for n in lowering["notes"])
    screenshot(page, "guards-recompile-graph")
    assert page_errors(page) == []


# -- diff -------------------------------------------------------------------------------
def test_a_diff_of_fusion_on_and_off_opens_from_its_permalink(page: Page) -> None:
    open_explorer(page, "/diff/add_relu/add_relu_nofusion")
    pane = page.locator("[data-pane=diff][data-filled=true]")
    expect(pane).to_be_visible()
    expect(pane.locator(".diff-changes")).to_contain_text("fusion true → false")
    row = pane.locator(".diff-kernels tbody tr").first
    expect(row).to_have_attribute("data-a", "cpp_poi_fused_add_relu_0")
    expect(row).to_have_attribute("data-b", "cpp_poi_fused_add_relu_0")
    expect(row.locator(".badge")).to_have_text("same name")
    expect(row.locator("td.delta")).to_have_text(re.compile(r"^[+−]?\d.*µs \([+-]?\d+%\)$"))
    expect(pane.locator(".code-diff").first).to_contain_text("identical")
    screenshot(page, "diff-fusion")


def test_ours_vs_inductor_matches_kernels_and_diffs_their_lines(page: Page) -> None:
    open_explorer(page, "/diff/add_relu/inductor")
    pane = page.locator("[data-pane=diff][data-filled=true]")
    inductor = fixture_stage("add_relu", "profile")["inductor"]["kernels"][0]["name"]
    row = pane.locator(".diff-kernels tbody tr").first
    expect(row).to_have_attribute("data-b", inductor)
    expect(row.locator(".badge")).to_have_text("same ops")
    diff = pane.locator(".code-diff").first
    expect(diff).to_have_attribute("open", "")
    expect(diff.locator("td.dt.add").first).to_be_visible()
    expect(diff.locator("td.dt.del").first).to_be_visible()
    expect(diff).to_contain_text("#pragma omp")
    screenshot(page, "diff-inductor")


def test_compiling_twice_links_a_diff_and_notes_an_option_that_changed_nothing(
    page: Page,
) -> None:
    compile_sample(page, "add_relu")
    expect(page.locator("#diff-previous")).to_be_hidden()
    page.click("#options-summary")
    page.uncheck("#opt-fusion")
    page.click("#options-summary")
    compile_and_wait(page)
    note = page.locator(".option-note")
    expect(note).to_contain_text("fusion true → false changed nothing in the generated code")
    link = page.locator("#diff-previous")
    expect(link).to_be_visible()
    assert re.fullmatch(r"/diff/\w+/\w+", link.get_attribute("href") or "")
    link.click()
    expect(page.locator("[data-pane=diff][data-filled=true]")).to_be_visible()


def test_the_inductor_diff_is_one_click_away_when_inductor_is_on(page: Page) -> None:
    open_explorer(page)
    page.select_option("#samples", "add_relu")
    turn_on_inductor(page)
    compile_and_wait(page)
    page.click("#diff-inductor")
    expect(page.locator(".diff-side").nth(1)).to_contain_text("TorchInductor")


def test_each_captured_graph_is_drawn_before_capture_ends(page: Page) -> None:
    """The training step's graphs stream one by one (capture_graph): with `capture` held
    back, the graph pane already draws them and the capture chip counts them."""
    n = len(fixture_stage("training", "capture")["graphs"])
    assert n > 1
    page.request.post("/stub/hold/capture")
    try:
        open_explorer(page)
        page.select_option("#samples", "training")
        page.click("#compile")
        expect(page.locator(".stage[data-stage=capture] .sms")).to_have_text(f"{n} graphs")
        expect(page.locator(".stage[data-stage=capture]")).to_have_class(has_class("running"))
        show_tab(page, "graph")
        expect(page.locator("[data-pane=graph][data-filled=true]")).to_be_attached()
        expect(page.locator(".graph-tabs .gtab")).to_have_count(n + 1)  # all, then each
        assert not page.evaluate("window.kernelscope.state.trace.has('capture')")
    finally:
        page.request.post("/stub/release")
    wait_done(page)
    expect(page.locator(".stage[data-stage=capture]")).to_have_class(has_class("done"))


def test_inductor_runs_after_our_result_then_fills_in_its_kernel_times(page: Page) -> None:
    """Our result (profile) is complete while "Inductor: running…" shows; the `inductor`
    event then fills in its total and each of its kernels' times (the stub holds that
    event until released: order, not timing)."""
    page.request.post("/stub/hold/inductor")
    try:
        open_explorer(page)
        page.select_option("#samples", "add_relu")
        turn_on_inductor(page)
        page.click("#compile")
        show_tab(page, "timings")
        running = page.locator(".timings-pane .inductor[data-state=running]")
        expect(running).to_contain_text("Inductor: running…")
        expect(page.locator(".timings-pane [data-total=kernelscope]")).to_be_visible()
        expect(page.locator(".stage[data-stage=inductor]")).to_have_class(has_class("running"))
        wait_done(page)  # `done` does not wait for Inductor (tests/browser/test_follow_ups.py)
        screenshot(page, "inductor-running")
    finally:
        page.request.post("/stub/release")
    done = page.locator(".timings-pane .inductor[data-state=done]")
    kernel = fixture_stage("add_relu", "profile")["inductor"]["kernels"][0]["name"]
    row = done.locator(f".inductor-kernels tr[data-kernel={kernel}]")
    expect(row).to_be_visible()
    expect(row.locator(".mini-val")).not_to_have_text("–")
    expect(page.locator(".timings-pane [data-total=inductor]")).to_be_visible()
    expect(page.locator(".stage[data-stage=inductor]")).to_have_class(has_class("done"))
    screenshot(page, "inductor-done")


# -- options ----------------------------------------------------------------------------
def test_every_option_the_server_lists_is_a_control_with_its_explanation(page: Page) -> None:
    from kernelscope.server.web.options import option_fields

    open_explorer(page)
    page.click("#options-summary")
    rows = page.locator(".opt-row")
    listed = [f for f in option_fields() if f["name"] not in ("device", "backend")]
    expect(rows).to_have_count(len(listed))
    for i, field in enumerate(listed):
        expect(rows.nth(i).locator(".opt-name")).to_have_text(field["name"])
        expect(rows.nth(i).locator(".opt-help")).to_have_text(field["help"])
    page.uncheck("#opt-memory_reuse")
    page.fill("#opt-persistent_rblock", "1024")
    page.locator("#opt-persistent_rblock").dispatch_event("change")
    expect(page.locator("#options-summary")).to_have_text("Options · 2 changed")
    screenshot(page, "options")
    bodies: list[dict] = []
    page.on(
        "request",
        lambda r: (
            bodies.append(json.loads(r.post_data or "{}"))
            if r.url.endswith("/api/compile")
            else None
        ),
    )
    page.click("#options-summary")
    compile_and_wait(page)
    opts = bodies[0]["options"]
    assert opts["memory_reuse"] is False and opts["persistent_rblock"] == 1024
    assert opts["fusion"] is True and opts["device"] == "cpu"


def test_a_string_option_is_a_text_field_whose_value_is_sent(page: Page) -> None:
    """gpu_target ("sm_90") was a number field: the browser dropped its value and nobody
    could pick another GPU target for Triton's offline stages."""
    open_explorer(page)
    page.click("#options-summary")
    expect(page.locator("#opt-gpu_target")).to_have_value("sm_90")
    page.fill("#opt-gpu_target", "sm_80")
    page.locator("#opt-gpu_target").dispatch_event("change")
    expect(page.locator("#options-summary")).to_have_text("Options · 1 changed")
    bodies: list[dict] = []
    page.on("request", lambda r: bodies.append(json.loads(r.post_data or "{}"))
            if r.url.endswith("/api/compile") else None)
    page.click("#options-summary")
    compile_and_wait(page)
    assert bodies[0]["options"]["gpu_target"] == "sm_80"


# -- editing ----------------------------------------------------------------------------
def test_an_edit_marks_the_result_stale_and_turns_provenance_off(page: Page) -> None:
    open_explorer(page)
    compile_and_wait(page)
    wait_panes_filled(page)
    expect(page.locator(".stale-note")).to_be_hidden()
    assert page.input_value("#samples") == "softmax_block"
    editor_line(page, 1).click()
    page.keyboard.press("Home")
    page.keyboard.type("# a comment\n# another\n")
    expect(page.locator(".stale-note")).to_be_visible()
    expect(page.locator("body")).to_have_class(has_class("stale"))
    assert page.input_value("#samples") == ""  # the menu no longer names the edited code
    hover_editor_line(page, 9)  # the gelu line, two lines down now
    assert highlighted_kernel_lines(page) == []
    expect(page.locator(".cm-line.ks-pv")).to_have_count(0)
    page.locator(".code-pane .cl.pv").first.hover()
    expect(page.locator(".cm-line.ks-hl")).to_have_count(0)
    screenshot(page, "stale")
    page.locator(".cm-content").focus()
    page.keyboard.press("Control+Enter")
    page.wait_for_function("window.kernelscope.state.trace.done !== null")
    expect(page.locator(".stale-note")).to_be_hidden()
    assert page.evaluate("window.kernelscope.state.trace.data('source').code").startswith(
        "# a comment"
    )


def test_the_snippets_own_output_has_its_pane(page: Page) -> None:
    open_explorer(page)
    page.evaluate("window.kernelscope.editor.code = 'import torch\\nprint(1)\\n'")
    compile_and_wait(page)
    show_tab(page, "output")
    out = page.locator("[data-pane=output][data-filled=true]")
    expect(out.locator("pre.stdout").nth(0)).to_have_text("hello from the snippet\n")
    expect(out.locator("h3").nth(1)).to_have_text("while capture ran")


def test_cancel_stops_a_running_compile(page: Page) -> None:
    cancels: list[str] = []
    page.on(
        "request",
        lambda r: (
            cancels.append(r.url) if r.method == "POST" and r.url.endswith("/cancel") else None
        ),
    )
    open_explorer(page)
    page.select_option("#samples", "sleepy")
    page.click("#compile")
    cancel = page.locator("button.cancel")
    expect(cancel).to_be_visible()
    expect(page.locator(".total")).to_contain_text("running ·")
    cancel.click()
    expect(page.locator(".total")).to_contain_text("cancelled after")
    expect(cancel).to_be_hidden()
    assert len(cancels) == 1 and "/api/jobs/" in cancels[0]
    expect(page.locator("#compile")).to_be_enabled()


def test_the_status_shows_wall_time_next_to_the_stage_sum(page: Page) -> None:
    open_explorer(page)
    compile_and_wait(page)
    expect(page.locator(".total")).to_have_text(re.compile(r"^done · \d+\.\d\d s wall · stages \d"))


# -- failures, figures ------------------------------------------------------------------
def test_a_failed_compile_is_shared_and_its_figures_say_what_failed(
    page: Page, new_page: Callable[[str], Page], stub: LiveServer
) -> None:
    compile_sample(page, "raises")
    total = page.locator(".total")
    expect(total).to_have_text(re.compile(r"^failed in capture · \d+\.\d\d s wall"))
    assert "µs" not in (total.text_content() or "")
    expect(page.locator("#share")).to_be_enabled()
    page.click("#share")
    url = page.locator("#permalink").input_value()
    fresh = new_page(stub.url)
    fresh.goto(url)
    fresh.wait_for_selector("body[data-ready=true]")
    wait_done(fresh)
    expect(fresh.locator(".error-banner .error-line")).to_have_text("line 6")
    expect(fresh.locator(".stage[data-stage=capture]")).to_have_class(has_class("failed"))
    expect(fresh.locator(".stage[data-stage=source]")).to_have_class(has_class("done"))
    expect(fresh.locator(".total")).to_have_text(re.compile(r"^failed in capture · stages "))


def test_figures_say_what_they_measure_and_bars_compare_with_eager(page: Page) -> None:
    open_explorer(page)
    compile_and_wait(page)
    head = page.locator(".kernel-head", has_text="cpp_poi_fused_gelu_1")
    expect(head.locator(".perf")).to_have_text(re.compile(r"^first launch 612 ms · runs "))
    show_tab(page, "timings")
    # A trace recorded before times had spreads: its ratio is said, its bar not judged.
    expect(page.locator("[data-total=kernelscope] .hbar")).to_have_class(has_class("alt"))
    expect(page.locator("[data-total=kernelscope]")).to_contain_text("faster than eager")
    expect(page.locator(".timings-pane th", has_text="first launch")).to_have_count(1)
    # A compile slower than eager beyond both spreads: its bar is red and says so.
    stored = load_fixture("add_relu")
    stored["id"] = "slow"
    for e in stored["events"]:
        if e["stage"] == "profile":
            eager = e["data"]["eager_ms"]
            e["data"]["kernelscope_ms"] = 9 * eager
            e["data"]["eager_time"] = {"ms": eager, "p10": 0.95 * eager, "p90": 1.05 * eager,
                                       "repeats": 5, "noisy": False}
            e["data"]["kernelscope_time"] = {"ms": 9 * eager, "p10": 8.5 * eager,
                                             "p90": 9.5 * eager, "repeats": 5, "noisy": False}
    page.route("**/api/traces/slow?split=1", lambda route: route.fulfill(json=stored))
    open_explorer(page, "/t/slow")
    wait_done(page)
    show_tab(page, "timings")
    expect(page.locator("[data-total=kernelscope] .hbar")).to_have_class(has_class("slow"))
    expect(page.locator("[data-total=kernelscope]")).to_contain_text("9.00× slower than eager")


def test_a_kernels_lower_stages_and_registers_show_when_the_compile_carries_them(
    page: Page,
) -> None:
    open_explorer(page)
    page.select_option("#opt-device", "cuda")
    compile_and_wait(page)
    section = page.locator("section.kernel[data-kernel=cpp_poi_fused_gelu_1]")
    bar = section.locator(".stage-bar")
    expect(bar.locator("button")).to_have_text(["source", "TTIR", "PTX"])
    expect(bar.locator(".facts")).to_contain_text("warps 4 · stages 3 · registers 32")
    bar.locator("button[data-stage=ptx]").click()
    expect(section.locator(".stage-code")).to_contain_text(".visible .entry cpp_poi_fused_gelu_1")
    expect(section.locator(".stage-src .code")).to_contain_text('extern "C"')  # beside it
    bar.locator("button", has_text="source").click()
    expect(section.locator(".stage-code")).to_have_count(0)
    expect(section.locator(".code")).to_contain_text('extern "C"')


# -- layout -----------------------------------------------------------------------------
def test_panes_maximise_and_restore(page: Page) -> None:
    open_explorer(page)
    compile_and_wait(page)
    page.click(".tabs-col .maxbtn")
    expect(page.locator(".editor-col")).to_be_hidden()
    expect(page.locator(".code-col")).to_be_hidden()
    width = page.evaluate("document.querySelector('.tabs-col').getBoundingClientRect().width")
    assert width > 1500
    screenshot(page, "maximised")
    page.keyboard.press("Escape")
    expect(page.locator(".editor-col")).to_be_visible()


@pytest.mark.parametrize("width", [1280, 600])
def test_no_sideways_scroll_at_1280_px_or_on_a_narrow_screen(page: Page, width: int) -> None:
    page.set_viewport_size({"width": width, "height": 900})
    open_explorer(page)
    compile_and_wait(page)
    wait_panes_filled(page)
    sideways = page.evaluate(
        "document.scrollingElement.scrollWidth - document.scrollingElement.clientWidth"
    )
    assert sideways <= 0
    show_tab(page, "memory")
    screenshot(page, f"width-{width}")
    if width == 600:  # columns stack
        boxes = page.evaluate(
            "[...document.querySelectorAll('.workspace > .col')]"
            ".map(c => c.getBoundingClientRect().top)"
        )
        assert boxes == sorted(boxes) and boxes[0] < boxes[1] < boxes[2]


def test_the_memory_chart_scrolls_when_it_is_wider_than_its_pane(page: Page) -> None:
    page.set_viewport_size({"width": 1280, "height": 900})
    open_explorer(page)
    compile_and_wait(page)
    show_tab(page, "memory")
    page.evaluate("document.documentElement.style.setProperty('--w-editor', '45%')")
    wrap = page.locator(".chart-wrap").first
    sizes = wrap.evaluate("w => [w.scrollWidth, w.clientWidth, getComputedStyle(w).overflowX]")
    assert sizes[2] == "auto"
    svg_width = page.evaluate("document.querySelector('svg.lifetimes').width.baseVal.value")
    assert sizes[0] >= svg_width


def test_the_light_theme_is_remembered(page: Page) -> None:
    open_explorer(page)
    dark = page.evaluate("getComputedStyle(document.body).backgroundColor")
    page.click("#theme")
    assert page.evaluate("document.documentElement.dataset.theme") == "light"
    light = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert light != dark
    compile_and_wait(page)
    screenshot(page, "light-theme")
    page.reload()
    page.wait_for_selector("body[data-ready=true]")
    assert page.evaluate("document.documentElement.dataset.theme") == "light"


def test_arrow_keys_walk_kernel_lines_and_their_provenance(page: Page) -> None:
    open_explorer(page)
    compile_and_wait(page)
    wait_panes_filled(page)
    page.locator(".code-pane").focus()
    page.keyboard.press("ArrowDown")
    first = page.locator(".code-pane .cl.cursor")
    expect(first).to_have_count(1)
    key = first.get_attribute("data-key")
    assert key and key in highlighted_kernel_lines(page)
    expect(page.locator(".cm-line.ks-hl")).not_to_have_count(0)
    page.keyboard.press("ArrowDown")
    assert page.locator(".code-pane .cl.cursor").get_attribute("data-key") != key
    # And from the editor: the cursor's line selects its provenance.
    editor_line(page, 7).click()
    page.keyboard.press("ArrowUp")
    page.keyboard.press("ArrowDown")
    marked = highlighted_kernel_lines(page)
    assert marked and all(k.startswith("0:cpp_poi_fused_gelu_1:") or "wrapper" in k for k in marked)


def test_graphs_zoom_and_scroll_to_highlighted_nodes(page: Page) -> None:
    page.set_viewport_size({"width": 1280, "height": 700})
    open_explorer(page)
    compile_and_wait(page)
    show_tab(page, "graph")
    page.wait_for_function("window.kernelscope.panes.find(p => p.id === 'graph').fx !== null")
    zoom = "window.kernelscope.panes.find(p => p.id === 'graph').fx.zoom()"
    before = page.evaluate(zoom)
    page.locator(".graph-col").first.locator(".zbtn", has_text="+").click()
    assert page.evaluate(zoom) > before
    page.locator(".graph-col").first.locator(".zbtn", has_text="+").click()
    page.locator(".graph-col").first.locator(".zbtn", has_text="+").click()
    editor_line(page, 9).click()  # the epilogue: the bottom of the graph
    inside = page.evaluate("""() => {
        const cy = window.kernelscope.panes.find(p => p.id === 'graph').fx;
        const b = cy.nodes('.hl').renderedBoundingBox();
        return b.x1 >= 0 && b.y1 >= 0 && b.x2 <= cy.width() && b.y2 <= cy.height(); }""")
    assert inside


def test_the_editor_never_stays_scrolled_sideways(page: Page) -> None:
    open_explorer(page)
    long = "x = 1  # " + "a very long comment " * 20
    page.evaluate(f"window.kernelscope.editor.code = {json.dumps(long)} + '\\n'")
    editor_line(page, 1).click(position={"x": 300, "y": 5})
    page.keyboard.press("End")
    assert page.evaluate("document.querySelector('.cm-scroller').scrollLeft") == 0


# -- not found --------------------------------------------------------------------------
@pytest.mark.parametrize("path", ["/t/doesnotexist", "/no/such/page", "/diff/add_relu/nope"])
def test_mistyped_links_get_the_pages_own_not_found_view(page: Page, path: str) -> None:
    statuses: list[int] = []

    def document(r: Request) -> None:
        if r.resource_type == "document":
            response = r.response()
            statuses.append(response.status if response else 0)

    page.on("requestfinished", document)
    open_explorer(page, path)
    view = page.locator(".not-found-view")
    expect(view).to_be_visible()
    expect(view.locator("h1")).to_have_text("Not found")
    expect(view.locator("a[href='/']")).to_be_visible()
    assert page_errors(page) == []
    if path.startswith("/t/"):
        assert statuses == [404]
        screenshot(page, "not-found")


def test_an_h200_trace_shows_tritons_stages_registers_and_inductors_kernels(page: Page) -> None:
    open_explorer(page, "/t/h200_softmax")
    wait_done(page)
    compiled = fixture_stage("h200_softmax", "compile")["graphs"][0]["kernels"][0]
    section = page.locator(f"section.kernel[data-kernel={compiled['name']}]")
    bar = section.locator(".stage-bar")
    expect(bar.locator("button")).to_have_text(
        ["source", "TTIR", "TTGIR", "LLVM IR", "PTX", "SASS"])
    expect(bar.locator(".facts")).to_contain_text(
        f"warps {compiled['num_warps']} · stages {compiled['num_stages']} · "
        f"registers {compiled['registers']}")
    expect(section.locator(".perf")).to_contain_text(f"{compiled['registers']} regs")
    bar.locator("button[data-stage=ptx]").click()
    expect(section.locator(".stage-code")).to_contain_text(".visible .entry")
    screenshot(page, "h200-ptx")
    bar.locator("button[data-stage=ttgir]").click()
    expect(section.locator(".stage-code")).to_contain_text("ttg.")
    screenshot(page, "h200-ttgir")
    show_tab(page, "timings")
    expect(page.locator("[data-total=kernelscope]")).to_contain_text("faster than eager")
    screenshot(page, "h200-timings")
    open_explorer(page, "/diff/h200_softmax/inductor")
    row = page.locator(".diff-kernels tbody tr").first
    expect(row).to_have_attribute("data-a", compiled["name"])
    expect(row).to_have_attribute("data-b", re.compile(r"^triton_"))
    screenshot(page, "h200-diff-inductor")


def test_h200_triton_lines_map_to_ptx_and_sass_lines_and_back(page: Page) -> None:
    """The compile event's line_maps: hovering a Triton line marks its PTX (or SASS) lines
    beside it, hovering a PTX line marks its Triton line and the user's line, and the
    arrow keys walk the stage's lines too."""
    open_explorer(page, "/t/h200_softmax")
    wait_done(page)
    compiled = fixture_stage("h200_softmax", "compile")["graphs"][0]["kernels"][0]
    name = compiled["name"]
    source = fixture_stage("h200_softmax", "codegen")["graphs"][0]["kernels"][0]["source"]
    load = next(i for i, t in enumerate(source.splitlines(), 1) if "tl.load(" in t)
    section = page.locator(f"section.kernel[data-kernel={name}]")
    section.locator(".stage-bar button[data-stage=ptx]").click()
    stage = section.locator(".stage-code")
    section.locator(f'.stage-src .cl[data-key="0:{name}:{load}"]').hover()
    marked = stage.locator(".cl.hl")
    expect(marked.first).to_be_visible()
    texts = marked.locator(".ct").all_text_contents()
    assert any("ld.global" in t for t in texts) and not any("st.global" in t for t in texts)
    screenshot(page, "h200-ptx-lines")
    # Back: a line of the store's PTX marks the tl.store line and the user's line 11.
    store_ptx = stage.locator(".cl.sv", has_text="st.global").first
    store_ptx.hover()
    store = next(i for i, t in enumerate(source.splitlines(), 1) if "tl.store(" in t)
    expect(section.locator(f'.cl.hl[data-key="0:{name}:{store}"]')).to_have_count(1)
    expect(page.locator(".cm-line.ks-hl")).to_have_count(1)
    # SASS: the same from the cubin's line table.
    section.locator(".stage-bar button[data-stage=sass]").click()
    section.locator(f'.stage-src .cl[data-key="0:{name}:{load}"]').hover()
    texts = section.locator(".stage-code .cl.hl .ct").all_text_contents()
    assert texts and any("LDG" in t for t in texts) and not any("STG" in t for t in texts)
    section.locator(f'.stage-src .cl[data-key="0:{name}:{load}"]').click()  # pinned
    page.mouse.move(0, 0)
    section.locator(".stage-code").scroll_into_view_if_needed()
    screenshot(page, "h200-sass-lines")
    # Keys: the walk reaches the stage's lines, each pinning its provenance.
    page.mouse.move(0, 0)
    page.locator(".code-pane").focus()
    picks = "els => els.filter(e => e.pick).length"
    kernel_rows = section.locator(".stage-src .cl").evaluate_all(picks)
    assert section.locator(".stage-code .cl").evaluate_all(picks) > 0
    for _ in range(kernel_rows + 1):  # past the kernel's lines, onto the first SASS line
        page.keyboard.press("ArrowDown")
    cursor = section.locator(".stage-code .cl.cursor")
    expect(cursor).to_have_count(1)
    expect(cursor).to_have_class(re.compile(r"\bhl\b"))


def test_a_trace_the_server_made_on_the_h200_shows_tritons_stages_and_registers(
    page: Page,
) -> None:
    """h200_server_softmax: the real server on the H200 host (sandboxed, two halves) stored
    it; its kernel has registers, warps, and Triton's stages with SASS and line maps."""
    open_explorer(page, "/t/h200_server_softmax")
    wait_done(page)
    assert page.evaluate("window.kernelscope.state.trace.done.isolated") is True
    compiled = fixture_stage("h200_server_softmax", "compile")["graphs"][0]["kernels"][0]
    section = page.locator(f"section.kernel[data-kernel={compiled['name']}]")
    expect(section.locator(".perf")).to_contain_text(f"{compiled['registers']} regs")
    bar = section.locator(".stage-bar")
    expect(bar.locator("button")).to_have_text(
        ["source", "TTIR", "TTGIR", "LLVM IR", "PTX", "SASS"])
    page.click(".code-col .maxbtn")
    bar.locator("button[data-stage=sass]").click()
    section.locator(".stage-src .cl.pv", has_text="tl.store(").click()
    expect(section.locator(".stage-code .cl.hl", has_text="STG").first).to_be_attached()
    page.mouse.move(0, 0)
    screenshot(page, "h200-server")


def test_the_graph_break_label_is_whole_and_listed_with_its_reason(page: Page) -> None:
    open_explorer(page)
    code = (
        "import torch\n\n\ndef f(x):\n    y = x.sin()\n"
        "    torch._dynamo.graph_break()  # a long comment that fills the editor's width\n"
        "    return y.cos()\n"
    )
    page.evaluate(f"window.kernelscope.editor.code = {json.dumps(code)}")
    compile_and_wait(page)
    line = editor_line(page, 6)
    expect(line).to_have_class(has_class("ks-break"))
    label = line.evaluate("""el => {
        const after = getComputedStyle(el, '::after');
        const box = el.getBoundingClientRect();
        const scroller = el.closest('.cm-scroller').getBoundingClientRect();
        return [after.content, after.display, box.right <= scroller.right + 1]; }""")
    assert label == ['"graph break"', "inline-block", True]
    assert page.evaluate("document.querySelector('.cm-scroller').scrollWidth") <= page.evaluate(
        "document.querySelector('.cm-scroller').clientWidth"
    )
    show_tab(page, "guards")
    expect(page.locator(".gbreak")).to_contain_text("call to torch._dynamo.graph_break()")
    expect(page.locator(".gbreak .line-chip")).to_have_text("6")
