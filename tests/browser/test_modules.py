"""Module provenance in the web UI, on a recorded 4-block transformer (a ModuleList of
identical blocks, fixtures/modules.json): the module tree pane, clicking `blocks.1.attn`
to list its nodes, buffers and kernels, kernels grouped by module in the code pane, and
repeated blocks told apart (the same source lines, different paths). Screenshots at
1440x900 and 1920x1080."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from browser_support import LiveServer, page_errors, screenshot
from playwright.sync_api import Page, expect
from stub_server import load_fixture
from ui import hover_steady, open_explorer, show_tab, wait_done

pytestmark = pytest.mark.browser

SIZES = [(1440, 900), (1920, 1080)]


def _opened(new_page: Callable[[str], Page], stub: LiveServer, size: tuple[int, int]) -> Page:
    page = new_page(stub.url)
    page.set_viewport_size({"width": size[0], "height": size[1]})
    open_explorer(page, "/t/modules")
    wait_done(page)
    show_tab(page, "modules")  # a tab's pane renders when it is first shown
    page.wait_for_selector("[data-pane=modules][data-filled=true]", state="attached")
    return page


def _fixture_selection(path: str) -> tuple[set[str], set[str], set[str]]:
    """What the trace itself says lies in module `path` (nodes, buffers, kernels)."""
    events = {e["stage"]: e["data"] for e in load_fixture("modules")["events"]}
    inside = lambda m: m is not None and (m == path or m.startswith(path + "."))  # noqa: E731
    nodes = {n["name"] for g in events["capture"]["graphs"] for n in g["nodes"]
             if inside(n["module"])}
    buffers = {b["name"] for g in events["lowering"]["graphs"] for b in g["buffers"]
               if any(inside(m) for m in b["modules"])}
    kernels = {k["name"] for g in events["scheduling"]["graphs"] for k in g["kernels"]
               if any(inside(m) for m in k["modules"])}
    return nodes, buffers, kernels


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_module_tree_lists_the_blocks_and_clicking_one_shows_its_parts(
    new_page: Callable[[str], Page], stub: LiveServer, size: tuple[int, int]
) -> None:
    page = _opened(new_page, stub, size)
    show_tab(page, "modules")
    rows = page.locator(".module-row")
    paths = rows.evaluate_all("els => els.map(e => e.dataset.module)")
    for i in range(4):
        assert f"blocks.{i}" in paths and f"blocks.{i}.attn" in paths
    expect(page.locator(".module-row[data-module='blocks.1.attn'] .mtype")).to_have_text(
        "Attention")
    page.click(".module-row[data-module='blocks.1.attn']")
    details = page.locator(".module-details")
    expect(details.locator("h4")).to_contain_text("blocks.1.attn")
    nodes, buffers, kernels = _fixture_selection("blocks.1.attn")
    assert nodes and buffers and kernels
    listed = lambda kind: set(details.locator(  # noqa: E731
        f"[data-list={kind}] li code").all_text_contents())
    assert listed("nodes") == nodes
    assert listed("buffers") == buffers
    assert listed("kernels") == kernels
    # The pinned module marks its kernels in the code pane, and no other block's.
    marked = set(page.eval_on_selector_all(".code-pane .kernel-head.hl .kname",
                                           "els => els.map(e => e.textContent)"))
    assert marked == kernels
    expect(page.locator(".module-row[data-module='blocks.1.attn']")).to_have_class(
        "module-row hl chosen")
    expect(page.locator(".module-row[data-module='blocks.2.attn']")).not_to_have_class(
        "module-row hl chosen")
    screenshot(page, f"modules-tree-{size[0]}x{size[1]}")
    assert page_errors(page) == []


# Whether an element lies wholly inside the window and inside the modules pane's visible box.
IN_VIEW = """(e) => {
  const r = e.getBoundingClientRect();
  const pane = e.closest('[data-pane=modules]').getBoundingClientRect();
  return r.height > 0 && r.top >= Math.max(0, pane.top) - 1
    && r.bottom <= Math.min(window.innerHeight, pane.bottom) + 1;
}"""


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_a_click_on_a_module_low_in_a_long_tree_shows_its_parts_in_view(
    new_page: Callable[[str], Page], stub: LiveServer, size: tuple[int, int]
) -> None:
    """The 4-block model's tree is taller than the pane: the chosen module's details were
    listed below the whole tree, out of sight, so a click seemed to do nothing."""
    page = _opened(new_page, stub, size)
    show_tab(page, "modules")
    row = page.locator(".module-row[data-module='blocks.3.mlp']")
    row.scroll_into_view_if_needed()
    row.click()
    details = page.locator(".module-details")
    expect(details.locator("h4")).to_contain_text("blocks.3.mlp")
    page.wait_for_timeout(200)  # a smooth scroll, if any, ends
    assert details.locator("h4").evaluate(IN_VIEW)
    assert details.locator("[data-list=kernels] b").evaluate(IN_VIEW)
    assert row.evaluate(IN_VIEW)
    screenshot(page, f"modules-low-click-{size[0]}x{size[1]}")


# Whether the element's middle is what the user sees there (nothing drawn over it).
UNCOVERED = """(e) => {
  const r = e.getBoundingClientRect();
  const top = document.elementFromPoint(r.left + 20, r.top + r.height / 2);
  return r.height > 0 && r.bottom <= window.innerHeight && e.contains(top);
}"""


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_a_models_kernel_index_leaves_its_kernels_in_sight(
    new_page: Callable[[str], Page], stub: LiveServer, size: tuple[int, int]
) -> None:
    """The code pane's kernel index stays on top as the pane scrolls. With the 4-block
    model's 34 kernels it covered the whole pane at 1440x900, and a kernel its chip
    scrolled to lay under it."""
    page = _opened(new_page, stub, size)
    pane = page.locator("[data-pane=code]")
    toc = page.locator(".code-pane .toc")
    seen = pane.evaluate("p => p.parentElement.clientHeight")
    assert toc.evaluate("t => t.getBoundingClientRect().height") <= 0.3 * seen
    chips = toc.locator("a.chip")
    assert chips.count() > 30
    chip = chips.nth(30)
    name = chip.text_content()
    chip.scroll_into_view_if_needed()
    chip.click()
    head = page.locator(f".code-pane section.kernel[data-kernel='{name}'] .kernel-head")
    # the smooth scroll ends with the head in sight (it stopped under the index before)
    page.wait_for_function(UNCOVERED, arg=head.element_handle(), timeout=5000)
    screenshot(page, f"code-index-{size[0]}x{size[1]}")


def test_code_pane_groups_kernels_by_module_and_tells_blocks_apart(
    new_page: Callable[[str], Page], stub: LiveServer
) -> None:
    page = _opened(new_page, stub, SIZES[0])
    groups = page.locator(".code-pane .module-group").evaluate_all(
        "els => els.map(e => e.dataset.module)")
    for i in range(4):
        assert f"blocks.{i}.attn" in groups
    # The same source line makes a kernel in every block: hovering one block's kernel
    # header names its own module.
    events = {e["stage"]: e["data"] for e in load_fixture("modules")["events"]}
    kernels = events["scheduling"]["graphs"][0]["kernels"]
    softmax = [k for k in kernels if "softmax" in k["name"] and k["kind"] == "reduction"]
    assert len({k["module"] for k in softmax}) == 4
    assert len({tuple(k["lines"]) for k in softmax}) == 1
    for k in softmax:
        head = page.locator(f".code-pane section.kernel[data-kernel='{k['name']}'] .kernel-head")
        expect(head.locator(".meta")).to_contain_text(k["module"])
    # Hovering a module heading marks that module's row in the tree.
    show_tab(page, "modules")
    hover_steady(page, ".code-pane .module-group[data-module='blocks.2.attn']")
    expect(page.locator(".module-row[data-module='blocks.2.attn']")).to_have_class(
        "module-row hl")
    screenshot(page, "modules-code-groups-1440x900")
    page.set_viewport_size({"width": 1920, "height": 1080})
    screenshot(page, "modules-code-groups-1920x1080")
    assert page_errors(page) == []
