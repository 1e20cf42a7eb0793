"""Model-sized traces in the web UI, as stored traces the compiler recorded
(fixtures/record_fixtures.py): the 4-block GPT of user modules (inference), the 6-block
Llama-style training step and the GPT-2-small-shaped training step (forward, backward,
AdamW). Each permalink opens with its code pane and kernel index, every tab fills on its
first show without an error, the graphs open folded by module and fitted, and the memory
chart fits its pane. How fast is scripts/page_timing.py's business (docs/perf.md): these
tests time nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from browser_support import LiveServer, page_errors, screenshot
from playwright.sync_api import Page, expect
from stub_server import load_fixture

pytestmark = pytest.mark.browser

MODELS = ["modules", "llama6_train", "gpt2_train"]
# Panes with content for every one of these traces (guards and output may be empty).
FILLED = ["graph", "ir", "modules", "fusion", "memory", "timings"]


def _events(name: str) -> dict[str, Any]:
    return {e["stage"]: e["data"] for e in load_fixture(name)["events"]}


def _open(new_page: Callable[[str], Page], stub: LiveServer, name: str) -> Page:
    page = new_page(stub.url)
    page.goto(f"/t/{name}")
    page.wait_for_selector("[data-pane=code][data-filled=true]", timeout=60_000)
    return page


def test_the_gpt2_fixture_is_a_gpt2_small_training_step() -> None:
    events = _events("gpt2_train")
    graphs = events["capture"]["graphs"]
    assert [g["kind"] for g in graphs] == ["forward", "backward", "inference"]
    paths = {m["path"] for g in graphs for m in g.get("modules", [])}
    assert {f"model.h.{i}" for i in range(12)} <= paths and "model.h.12" not in paths
    weight = next(n for n in graphs[0]["nodes"] if n["op"] == "placeholder"
                  and n["shape"] == [2304, 768])
    assert weight  # c_attn of width 768
    generated = [len(g["kernels"]) for g in events["codegen"]["graphs"]]
    scheduled = [len(g["kernels"]) for g in events["scheduling"]["graphs"]]
    # The recorded step's kernels: a change to fusion or to the recording shows here.
    assert generated == [100, 129, 296] and scheduled == [173, 277, 296]


@pytest.mark.parametrize("name", MODELS)
def test_a_model_trace_opens_and_every_tab_fills(
    new_page: Callable[[str], Page], stub: LiveServer, name: str
) -> None:
    page = _open(new_page, stub, name)
    events = _events(name)
    kernels = sum(len(g["kernels"]) for g in events["codegen"]["graphs"])
    expect(page.locator(".code-pane .toc .chip")).to_have_count(kernels)
    # Code is drawn as it nears the view: a section far below has its height, not its lines.
    assert page.locator(".code-pane section.kernel .code").count() >= 1
    for tab in FILLED:
        page.click(f"#tabs .tab[data-tab={tab}]")
        page.wait_for_selector(f"[data-pane={tab}][data-filled=true]", timeout=60_000)
    page.click("#tabs .tab[data-tab=graph]")
    page.wait_for_function(
        "() => { const p = document.querySelector('[data-pane=graph]');"
        " return p.dataset.filled === 'true' && !p.dataset.pending; }", timeout=60_000)
    screenshot(page, f"model-{name}")
    assert page_errors(page) == []


@pytest.mark.parametrize("name", MODELS)
def test_a_model_graph_opens_folded_by_module_and_fitted(
    new_page: Callable[[str], Page], stub: LiveServer, name: str
) -> None:
    page = _open(new_page, stub, name)
    page.click("#tabs .tab[data-tab=graph]")
    page.wait_for_function(
        "() => { const p = document.querySelector('[data-pane=graph]');"
        " return p.dataset.filled === 'true' && !p.dataset.pending; }", timeout=60_000)
    shown = page.evaluate("""() => {
      const g = window.kernelscope.panes.find((p) => p.id === 'graph');
      const inside = (cy) => { const b = cy.elements().renderedBoundingBox();
        return b.x1 >= -1 && b.y1 >= -1 && b.x2 <= cy.width() + 1 && b.y2 <= cy.height() + 1; };
      return { nodes: g.fx.nodes().length, labels: g.fx.nodes('.group').map((n) => n.data('label')),
               fitted: inside(g.fx), kernelsFitted: inside(g.kg) };
    }""")
    graph = _events(name)["capture"]["graphs"][0]
    assert shown["nodes"] < len(graph["nodes"]) / 4
    stacked = {"modules": "blocks.0-3 ×4", "llama6_train": "model.layers.0-5 ×6",
               "gpt2_train": "model.h.0-11 ×12"}[name]
    assert any(label.startswith(stacked) for label in shown["labels"]), shown["labels"]
    assert shown["fitted"] and shown["kernelsFitted"]
    # Opening the stack shows its blocks, and folding again restores it.
    page.evaluate("""(label) => {
      const g = window.kernelscope.panes.find((p) => p.id === 'graph');
      g.fx.nodes('.group').filter((n) => n.data('label').startsWith(label)).emit('tap');
    }""", stacked)
    page.wait_for_function("""(label) => {
      const g = window.kernelscope.panes.find((p) => p.id === 'graph');
      return !g.el.dataset.pending && g.fx.nodes('.group').some((n) =>
        n.data('label').split(' ')[0].endsWith('.1'));
    }""", arg=stacked, timeout=60_000)
    assert page_errors(page) == []


def test_the_memory_chart_fits_its_pane(new_page: Callable[[str], Page], stub: LiveServer) -> None:
    page = _open(new_page, stub, "llama6_train")
    page.click("#tabs .tab[data-tab=memory]")
    page.wait_for_selector("[data-pane=memory][data-filled=true]")
    steps = [len(g["steps"]) for g in _events("llama6_train")["memory"]["graphs"]]
    # A graph after the first is drawn as it nears the view.
    assert page.locator(".chart-wrap").count() == 1
    page.locator(".memory-pane > section").last.scroll_into_view_if_needed()
    expect(page.locator(".chart-wrap")).to_have_count(len(steps))
    sizes = page.evaluate("""() => [...document.querySelectorAll('.chart-wrap')].map((w) =>
      [w.scrollWidth, w.clientWidth, w.querySelectorAll('g.step').length])""")
    assert [s[2] for s in sizes] == steps and min(steps) > 50
    assert all(scroll <= client + 1 for scroll, client, _ in sizes), sizes


def test_the_memory_chart_draws_rows_as_read_and_keeps_them_in_view(
        new_page: Callable[[str], Page], stub: LiveServer) -> None:
    """The 6-block step's forward graph has 202 buffers: the rows near the chart's view are
    drawn, the rest as they scroll near or when a selection marks them; the kernels' names
    stay above the rows as they scroll, and a chart drawn again (a new width) keeps them."""
    page = _open(new_page, stub, "llama6_train")
    page.click("#tabs .tab[data-tab=memory]")
    page.wait_for_selector("[data-pane=memory][data-filled=true]")
    buffers = [b["name"] for b in _events("llama6_train")["memory"]["graphs"][0]["buffers"]]
    wrap = page.locator(".chart-wrap").first
    drawn = wrap.locator("g.mbar")
    assert 0 < drawn.count() < len(buffers) / 2
    last = wrap.locator(f"g.mbar[data-buffer={buffers[-1]}]")
    expect(last).to_have_count(0)
    wrap.scroll_into_view_if_needed()
    wrap.evaluate("w => { w.scrollTop = w.scrollHeight; }")
    expect(last).to_have_count(1)
    offset = wrap.evaluate("""w => w.querySelector('.chart-head').getBoundingClientRect().top
                              - w.getBoundingClientRect().top""")
    assert abs(offset) <= 1, offset  # the head is at the top of the scrolled chart
    top = wrap.evaluate("w => w.scrollTop")
    assert top > 1000
    page.evaluate("""() => { const m = window.kernelscope.panes.find((p) => p.id === 'memory');
                             m.render(m.trace); }""")
    page.wait_for_function("(top) => document.querySelector('.chart-wrap').scrollTop === top",
                           arg=top)
    expect(page.locator(f".chart-wrap g.mbar[data-buffer={buffers[-1]}]").first).to_be_attached()
    # A selection of a row not drawn yet draws and marks it.
    page.evaluate("document.querySelector('.chart-wrap').scrollTop = 0")
    middle = buffers[len(buffers) // 2]
    page.evaluate("""(key) => window.kernelscope.panes.find((p) => p.id === 'memory')
                     .select({ buffers: new Set([key]) })""", f"0:{middle}")
    expect(page.locator(f".chart-wrap g.mbar.hl[data-buffer={middle}]")).to_have_count(1)
    assert page_errors(page) == []


@pytest.mark.parametrize("name", ["llama6_train", "gpt2_train"])
def test_hovering_a_line_of_every_block_never_zooms_the_graph_out_of_reading(
        new_page: Callable[[str], Page], stub: LiveServer, name: str) -> None:
    """A source line every block runs selects nodes across the whole graph: revealing them
    never zooms below the readable minimum (graph.js, MIN_READABLE_ZOOM)."""
    nodes = _events(name)["capture"]["graphs"][0]["nodes"]
    blocks: dict[int, set[str]] = {}
    for n in nodes:
        if n.get("line") and n.get("module"):
            blocks.setdefault(n["line"], set()).add(".".join(n["module"].split(".")[:3]))
    line = max(blocks, key=lambda k: len(blocks[k]))
    assert len(blocks[line]) >= 6, blocks[line]
    page = _open(new_page, stub, name)
    page.wait_for_selector("body[data-ready=true]")
    page.click("#tabs .tab[data-tab=graph]")
    page.wait_for_function(
        "() => { const p = document.querySelector('[data-pane=graph]');"
        " return p.dataset.filled === 'true' && !p.dataset.pending; }", timeout=60_000)
    zoom = "window.kernelscope.panes.find((p) => p.id === 'graph').fx.zoom()"
    for _ in range(6):
        page.locator(".graph-col").first.locator(".zbtn", has_text="+").click()
    before = page.evaluate(zoom)
    assert before >= 0.8
    page.evaluate("(n) => window.kernelscope.editor.revealLine(n)", line)
    page.evaluate("""(n) => { const v = window.kernelscope.editor.view;
      const at = v.coordsAtPos(v.state.doc.line(n).from);
      const el = document.elementFromPoint(at.left + 8, (at.top + at.bottom) / 2);
      el.dispatchEvent(new MouseEvent('mousemove', { bubbles: true, clientX: at.left + 8,
        clientY: (at.top + at.bottom) / 2 })); }""", line)
    page.wait_for_function("() => window.kernelscope.panes.find((p) => p.id === 'graph')"
                           ".fx.nodes('.hl').length > 0")
    assert page.evaluate(zoom) >= 0.8 - 1e-6
    assert page_errors(page) == []


def test_the_ir_pane_makes_cards_as_read_and_draws_a_selected_one(
        new_page: Callable[[str], Page], stub: LiveServer) -> None:
    """The GPT-2 step's forward graph has 400 buffers: their cards are made as they near the
    view, and revealing a selection past them makes the rest and marks its card."""
    page = _open(new_page, stub, "gpt2_train")
    page.click("#tabs .tab[data-tab=ir]")
    page.wait_for_selector("[data-pane=ir][data-filled=true]")
    graphs = _events("gpt2_train")["lowering"]["graphs"]
    buffers = [b["name"] for b in graphs[0]["buffers"]]
    cards = page.locator("[data-pane=ir] .ir-card")
    assert 0 < cards.count() < len(buffers) / 2
    last = buffers[-1]
    expect(page.locator(f"[data-pane=ir] .ir-card[data-buffer={last}]")).to_have_count(0)
    page.evaluate("""(key) => {
      const k = window.kernelscope;
      const sel = { lines: new Set(), nodes: new Set(), buffers: new Set([key]),
        kernels: new Set(), klines: new Set(), slines: new Set(), modules: new Set() };
      k.bus.pin(sel);
      k.panes.find((p) => p.id === 'ir').scrollToSelection();
    }""", f"0:{last}")
    expect(page.locator(f"[data-pane=ir] .ir-card.hl[data-buffer={last}]")).to_have_count(1)
    assert cards.count() == sum(len(g["buffers"]) for g in graphs)  # every graph's, here
    assert page_errors(page) == []


def test_the_guards_pane_draws_a_models_guards_as_read(
        new_page: Callable[[str], Page], stub: LiveServer) -> None:
    """The GPT-2 step's compiles have 200 guards each: 40 rows of each table at once, a row
    saying how many are left, and the rest as it is scrolled to."""
    page = _open(new_page, stub, "gpt2_train")
    compiles = _events("gpt2_train")["capture"]["compiles"]
    big = next(i for i, c in enumerate(compiles) if len(c["guards"]) == 200)
    page.click("#tabs .tab[data-tab=guards]")
    page.wait_for_selector("[data-pane=guards][data-filled=true]")
    table = page.locator(".compile-card table.guards").nth(
        sum(1 for c in compiles[:big] if c.get("guards")))
    expect(table.locator("tbody > tr:not(.more)")).to_have_count(40)
    more = table.locator("tr.more")
    expect(more).to_have_text("160 more guards…")
    more.scroll_into_view_if_needed()
    expect(table.locator("tbody > tr:not(.more)")).not_to_have_count(40)
    rows = table.locator("tbody > tr:not(.more)")
    for _ in range(20):  # a chunk per scroll to the end
        if rows.count() == 200:
            break
        if more.count():
            more.scroll_into_view_if_needed()
        page.wait_for_timeout(150)
    expect(rows).to_have_count(200)
    expect(more).to_have_count(0)
    assert page_errors(page) == []
