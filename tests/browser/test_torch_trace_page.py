"""A trace opened from a stock-Inductor TORCH_TRACE log (fixtures/torch_trace.json, made by
record_fixtures.py from a real log): the run panel says where it came from and names what a
log does not hold, each compile id with its recompile reasons, and a record the reader did
not know opens to its text; Inductor's kernels fill the code pane and the kernel table."""

from __future__ import annotations

import re

import pytest
from browser_support import page_errors, screenshot
from playwright.sync_api import Page, expect
from ui import open_explorer, show_tab

pytestmark = pytest.mark.browser


def test_a_torch_trace_log_opens_with_its_compiles_and_what_it_lacks(page: Page) -> None:
    open_explorer(page, "/t/torch_trace")
    panel = page.locator(".log-panel")
    expect(panel).to_be_visible()
    expect(panel.locator(".run-head")).to_contain_text("TORCH_TRACE log")
    expect(panel.locator(".log-absent")).to_contain_text("fusion decisions")
    expect(panel.locator(".log-absent")).to_contain_text("buffer plan")
    panel.locator(".log-compiles > summary").click()
    again = panel.locator("tr[data-compile='0/1']")
    expect(again).to_contain_text(re.compile(r"rank mismatch|size mismatch"))
    first = panel.locator("tr[data-compile='0/0']")
    first.locator(".log-records > summary").click()
    unknown = first.locator("details.log-unknown[data-record=a_record_from_the_future]")
    unknown.locator("summary").click()
    expect(unknown.locator("pre")).to_have_text("something new")
    expect(page.locator(".version-notice")).to_have_count(0)
    expect(page.locator("body")).to_contain_text("cpp_fused_mul_sin_0")
    screenshot(page, "torch-trace-open")
    # The user's line reaches Inductor's kernel for it, whole (a log has no scheduling),
    # and every pane opens on a trace without our stages.
    kernels = page.evaluate(
        "window.kernelscope.state.trace.kernels().map((k) => [k.name, k.gid, k.lines])")
    assert ["cpp_fused_mul_sin_0", 0, [5]] in kernels
    for tab in ("graph", "ir", "fusion", "memory", "timings"):
        show_tab(page, tab)
    assert page_errors(page) == []


def test_its_kernel_table_lists_every_call_of_every_graph(page: Page) -> None:
    open_explorer(page, "/diff/torch_trace/inductor")
    rows = page.locator(".compare-table tbody tr")
    expect(rows.first).to_be_visible()
    assert rows.count() >= 4  # two graphs per call of f (a break), two calls (a recompile)
    expect(page.locator(".compare-table")).to_contain_text("cpp_fused_add_relu_0")
    # Every kernel with its compile id and the user's lines of the nodes it covers.
    sin = page.locator(".compare-table tbody tr[data-b^='cpp_fused_mul_sin_0']").first
    expect(sin.locator("td").nth(0)).to_have_text("0/0 inference")
    expect(sin.locator("td").nth(2)).to_have_text("5")
    # Its code, kept once per graph in the log's codegen (the table carries none).
    code = page.locator(".compare-kernel[data-side='b'][data-kernel^='cpp_fused_mul_sin_0'] "
                        "pre.compare-source").first
    expect(code).to_contain_text("sin")
    assert page_errors(page) == []


def test_a_logged_graph_is_rebuilt_by_kernelscope_on_one_click(page: Page) -> None:
    """The run panel says how many logged graphs Kernelscope can rebuild; a graph's button
    puts its snippet (compiler/trace/rebuild.py, from the server) in the editor and compiles
    it as any snippet is compiled (POST /api/compile, the job's stream), and the finished
    trace links to its comparison with Inductor's kernels for that graph in the log."""
    open_explorer(page, "/t/torch_trace")
    rebuild = page.locator(".log-panel .log-rebuild")
    expect(rebuild.locator("summary")).to_contain_text("4 of 4 logged graphs rebuildable")
    row = rebuild.locator("tr[data-graph='0']")
    expect(row).to_contain_text("0/0 inference")
    with page.expect_request("**/api/compile") as posted:
        row.locator("button.rebuild").click()
    code = posted.value.post_data_json["code"]
    assert code.startswith("# Rebuilt by Kernelscope from the TORCH_TRACE log of trace "
                           "torch_trace, graph 0")
    assert "torch.ops.aten.sin.default(arg0_1)" in code
    expect(page.locator("body")).to_have_attribute("class", re.compile(r"^(?!.*running)"))
    link = page.locator("#diff-inductor")
    expect(link).to_be_visible()
    expect(link).to_have_attribute("href", re.compile(r"^/diff/[^/]+/torch_trace$"))
    assert page.evaluate("window.kernelscope.editor.code").startswith("# Rebuilt by")
    assert page_errors(page) == []
