"""A model's trace at 1440x900 and 1920x1080: every analysis pane fits its column (no
table or graph wider than the column, nothing clipped), the columns resize by dragging,
and the fusion refusals are grouped by reason with the uninteresting ones folded."""

from __future__ import annotations

import pytest
from browser_support import screenshot
from playwright.sync_api import Page, expect
from stub_server import load_fixture
from ui import open_explorer, show_tab, wait_done, wait_graph_laid_out

pytestmark = pytest.mark.browser

SIZES = [(1440, 900), (1920, 1080)]

# An element sticks out of its pane when its right edge passes the pane's (a table wider
# than the column, scrolled sideways or cut off).
OVERFLOW = """(pane) => {
  const box = pane.getBoundingClientRect();
  return [...pane.querySelectorAll('table, .cy, canvas, .hbar-row, section, h3, h4, details')]
    .filter((e) => e.offsetParent !== null)
    .map((e) => [e, e.getBoundingClientRect()])
    .filter(([e, r]) => r.right > box.right + 1 || e.scrollWidth > e.clientWidth + 1
                        && getComputedStyle(e).overflowX !== 'auto')
    .map(([e]) => `${e.tagName.toLowerCase()}.${e.className}`);
}"""


# How many nodes of each graph (FX, kernels) are out of view after the graph tab opens
# (the graphs open folded by module, and fitted).
HIDDEN_NODES = """() => {
  const pane = window.kernelscope.panes.find((p) => p.id === 'graph');
  return [pane.fx, pane.kg].map((cy) => {
    const ext = cy.extent();
    return cy.nodes().filter((n) => {
      const p = n.position();
      return !(p.x > ext.x1 && p.x < ext.x2 && p.y > ext.y1 && p.y < ext.y2);
    }).length;
  });
}"""


# The FX graph's nodes in view that the pane's left edge cuts in two.
CUT_AT_LEFT = """() => {
  const cy = window.kernelscope.panes.find((p) => p.id === 'graph').fx;
  return cy.nodes().filter((n) => {
    const r = n.renderedBoundingBox();
    return r.x1 < -1 && r.x2 > 1 && r.y2 > 0 && r.y1 < cy.height();
  }).map((n) => n.id());
}"""


@pytest.mark.parametrize("size", SIZES)
def test_a_models_fx_graph_opens_with_no_node_cut_at_the_left(
    page: Page, size: tuple[int, int]
) -> None:
    """A model's FX graph opens folded by module and fitted: no node is cut in two by the
    pane's edge (the 4-block model's FX graph opened with its layer-norm nodes cut at the
    left) and none is out of view."""
    page.set_viewport_size({"width": size[0], "height": size[1]})
    open_explorer(page, "/t/modules")
    wait_done(page)
    show_tab(page, "graph")
    wait_graph_laid_out(page)
    screenshot(page, f"layout-graph-left-{size[0]}x{size[1]}")
    assert page.evaluate(CUT_AT_LEFT) == []
    assert page.evaluate(HIDDEN_NODES) == [0, 0]


@pytest.mark.parametrize("size", SIZES)
def test_a_models_panes_fit_their_column(page: Page, size: tuple[int, int]) -> None:
    page.set_viewport_size({"width": size[0], "height": size[1]})
    open_explorer(page, "/t/modules")
    wait_done(page)
    failures = {}
    for tab in ("fusion", "timings", "graph", "memory", "ir"):
        show_tab(page, tab)
        pane = page.locator(f"[data-pane={tab}]")
        if tab == "graph":
            wait_graph_laid_out(page)
        screenshot(page, f"layout-{tab}-{size[0]}x{size[1]}")
        if out := pane.evaluate(OVERFLOW):
            failures[tab] = out
        if tab == "graph" and (hidden := page.evaluate(HIDDEN_NODES)) != [0, 0]:
            failures[tab] = f"nodes out of view in each graph: {hidden}"
    assert failures == {}


def test_the_columns_resize_by_dragging(page: Page) -> None:
    page.set_viewport_size({"width": 1440, "height": 900})
    open_explorer(page, "/t/modules")
    wait_done(page)
    right = page.locator(".workspace > .col").last
    before = right.bounding_box()
    handle = page.locator(".workspace > .splitter").last.bounding_box()
    assert before and handle
    page.mouse.move(handle["x"] + 2, handle["y"] + 200)
    page.mouse.down()
    page.mouse.move(handle["x"] - 200, handle["y"] + 200, steps=5)
    page.mouse.up()
    after = right.bounding_box()
    assert after and after["width"] > before["width"] + 150


def test_fusion_refusals_are_grouped_by_reason_and_extern_calls_folded(page: Page) -> None:
    page.set_viewport_size({"width": 1440, "height": 900})
    open_explorer(page, "/t/modules")
    wait_done(page)
    show_tab(page, "fusion")
    sched = next(e["data"] for e in load_fixture("modules")["events"]
                 if e["stage"] == "scheduling")
    refused = [d for g in sched["graphs"] for d in g["decisions"] if not d["fused"]]
    assert refused
    groups = page.locator(".fusion-pane details.refusals")
    expect(groups.first).to_be_visible()
    counts = groups.evaluate_all("els => els.map(e => Number(e.dataset.count))")
    assert sum(counts) == len(refused)
    folded = page.locator(".fusion-pane details.refusals.quiet")
    assert folded.count() >= 1
    assert all(not o for o in folded.evaluate_all("els => els.map(e => e.open)"))
    expect(folded.first.locator("summary")).to_contain_text("extern")
    screenshot(page, "layout-fusion-refusals-1440x900")


# Cells of the fusion decisions whose one word ("vertical") the column broke over lines.
BROKEN_KINDS = """() => [...document.querySelectorAll(
    '.fusion-pane table.decisions tbody td:nth-child(3)')]
  .filter((td) => td.offsetParent !== null && td.textContent)
  .filter((td) => { const r = document.createRange(); r.selectNodeContents(td);
                    return r.getClientRects().length > 1; })
  .map((td) => td.textContent)"""


def test_a_fusion_decisions_kind_is_never_broken_over_lines(page: Page) -> None:
    """At 1440x900 the decisions' kind column was squeezed until "vertical" read
    "vertic / al"."""
    page.set_viewport_size({"width": 1440, "height": 900})
    open_explorer(page, "/t/modules")
    wait_done(page)
    show_tab(page, "fusion")
    page.locator(".fusion-pane details.refusals").first.evaluate("d => d.open = true")
    expect(page.locator(".fusion-pane details.refusals").first.locator("tbody tr").first
           ).to_be_visible()
    assert page.evaluate(BROKEN_KINDS) == []


@pytest.mark.parametrize("size", SIZES)
def test_the_timings_bandwidth_column_fits(page: Page, size: tuple[int, int]) -> None:
    """The H200 trace has real per-kernel times and GB/s, the widest Timings table."""
    page.set_viewport_size({"width": size[0], "height": size[1]})
    open_explorer(page, "/t/h200_softmax")
    wait_done(page)
    show_tab(page, "timings")
    pane = page.locator("[data-pane=timings]")
    expect(pane.locator("table.kernels")).to_contain_text("GB/s")
    screenshot(page, f"layout-h200-timings-{size[0]}x{size[1]}")
    assert pane.evaluate(OVERFLOW) == []
