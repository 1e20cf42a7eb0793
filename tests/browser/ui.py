"""Helpers the browser tests share: what a user does on the page, and what they see."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import Page, expect

PANES = ["code", "graph", "ir", "fusion", "memory", "timings"]


def open_explorer(page: Page, path: str = "/") -> None:
    page.goto(path)
    page.wait_for_selector("body[data-ready=true]")


def turn_on_inductor(page: Page) -> None:
    """Ticks the Inductor comparison in the options panel (opened and closed again)."""
    page.click("#options-summary")
    page.check("#opt-inductor")
    page.click("#options-summary")


def compile_and_wait(page: Page, timeout_s: float = 30) -> None:
    """Clicks Compile and waits for the job's `done` event."""
    page.click("#compile")
    wait_done(page, timeout_s)


def wait_done(page: Page, timeout_s: float = 30) -> None:
    page.wait_for_function("window.kernelscope.state.trace.done !== null", timeout=timeout_s * 1000)


def wait_panes_filled(page: Page, panes: list[str] = PANES, timeout_s: float = 10) -> None:
    """Waits until each pane has content. A tab's pane renders when it is first shown, so
    each tab is shown in turn; the tab that was showing is shown again at the end."""
    active = page.evaluate(
        "document.querySelector('#tabs .tab.active')?.dataset.tab ?? null"
    )
    for pane in panes:
        if pane != "code" and page.locator(f"#tabs .tab[data-tab={pane}]").count():
            page.click(f"#tabs .tab[data-tab={pane}]")
        page.wait_for_selector(
            f"[data-pane={pane}][data-filled=true]", state="attached", timeout=timeout_s * 1000
        )
    if active:
        page.click(f"#tabs .tab[data-tab={active}]")


def show_tab(page: Page, tab: str) -> None:
    """Show a tab and wait for its pane: the real one, not the stand-in that imports its
    module on the first show (webui/js/panes/lazy.js)."""
    page.click(f".tab[data-tab={tab}]")
    page.wait_for_selector(f"[data-pane={tab}]:not([hidden]):not([data-lazy])")


def hover_steady(page: Page, selector: str) -> None:
    """Hover an element once it has stopped moving. The code pane lays out an off-screen
    section only when it nears the viewport (content-visibility), so scrolling one into
    view can move what is below it for a few frames; a hover aimed before that lands on
    another heading (a loaded CI run hovered blocks.2.attn.qkv for blocks.2.attn)."""
    target = page.locator(selector)
    target.scroll_into_view_if_needed()
    page.wait_for_function(
        """sel => new Promise((done) => {
             let last = null, still = 0;
             const tick = () => {
               const r = document.querySelector(sel).getBoundingClientRect();
               const at = `${r.x},${r.y},${r.width},${r.height}`;
               still = at === last ? still + 1 : 0;
               last = at;
               if (still >= 5) done(true); else requestAnimationFrame(tick);
             };
             tick();
           })""",
        arg=selector,
    )
    target.hover()


def wait_graph_laid_out(page: Page, timeout_s: float = 30) -> None:
    """The graph pane has drawn its graphs (their layout runs in a worker)."""
    page.wait_for_function(
        "() => { const p = document.querySelector('[data-pane=graph]');"
        " return p.dataset.filled === 'true' && !p.dataset.pending; }",
        timeout=timeout_s * 1000,
    )


def editor_line(page: Page, n: int) -> Any:
    return page.locator(".cm-content .cm-line").nth(n - 1)


def hover_editor_line(page: Page, n: int) -> None:
    editor_line(page, n).hover(position={"x": 8, "y": 5})


def highlighted_kernel_lines(page: Page) -> list[str]:
    return page.eval_on_selector_all(
        ".code-pane .cl.hl[data-key]", "els => els.map(e => e.dataset.key)"
    )


def kernel_sources(page: Page) -> dict[str, str]:
    """Kernel name -> the source text shown in the Code pane. A kernel whose code the pane
    draws only when it nears the view (a placeholder until then) is drawn first."""
    return page.evaluate("""() => {
      const code = window.kernelscope.panes.find((p) => p.id === 'code');
      for (const place of [...(code.lazy?.values() ?? [])]) place();
      return Object.fromEntries(
        [...document.querySelectorAll('.code-pane section.kernel[data-kernel]')]
          .filter(s => s.querySelector('.code'))
          .map(s => [s.dataset.kernel,
                     [...s.querySelectorAll('.cl .ct')].map(c => c.textContent).join('\\n')]));
    }""")


def trace_stages(page: Page) -> list[str]:
    return page.evaluate("window.kernelscope.state.trace.events.map(e => e.stage)")


def open_backward_graph(page: Page, backward: set[str]) -> None:
    """Click a training trace's backward graph tab: only its kernels show, and its FX
    graph (the graph pane) has the gradient input `tangents_1`."""
    page.click(".gtab[data-graphs='1']")
    expect(page.locator(".gtab.active")).to_have_text("backward 1")
    assert set(kernel_sources(page)) == backward
    show_tab(page, "graph")
    page.wait_for_function(
        "() => window.kernelscope.panes.find(p => p.id === 'graph').fx?.nodes().length > 0"
    )
    names = page.evaluate(
        "window.kernelscope.panes.find(p => p.id === 'graph').fx.nodes().map(n => n.id())"
    )
    assert "tangents_1" in names
