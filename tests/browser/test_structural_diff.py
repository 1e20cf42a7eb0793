"""The diff view compares two compiles' structure (graph nodes, kernels, fusion, the
buffer plan) and their kernels grouped by the FX nodes they fuse, each group timed as a
set (the groups come from GET /api/diff: compiler/compare/match.py, the one FX-node matcher;
webui/js/diff.js structure). Ours against Inductor: the groups side by side with both
compilers' code, kernel by kernel."""

from __future__ import annotations

import re

import pytest
from browser_support import page_errors, screenshot
from playwright.sync_api import Page, expect
from ui import open_explorer

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("size", [(1440, 900), (1920, 1080)])
def test_a_diff_shows_structure_and_fused_groups(page: Page, size: tuple[int, int]) -> None:
    page.set_viewport_size({"width": size[0], "height": size[1]})
    open_explorer(page, "/diff/add_relu/modules")
    table = page.locator(".diff-structure-table")
    expect(table.locator("tr[data-what=kernels] td").nth(1)).to_have_text("1")
    expect(table.locator("tr[data-what='peak bytes']")).to_have_class("changed")
    groups = page.locator(".diff-group-table tbody tr")
    expect(groups.first).to_be_visible()
    assert groups.count() > 1
    screenshot(page, f"diff-structure-{size[0]}x{size[1]}")
    assert page_errors(page) == []


def test_ours_against_inductor_groups_without_fx_nodes(page: Page) -> None:
    """Inductor's kernels carry no FX nodes: each stands alone, ours still group."""
    open_explorer(page, "/diff/h200_softmax/inductor")
    rows = page.locator(".diff-group-table tbody tr")
    expect(rows.first).to_be_visible()
    assert rows.count() >= 2
    expect(page.locator(".diff-structure-table")).to_have_count(0)
    assert page_errors(page) == []


def test_ours_against_inductor_kernel_by_kernel(page: Page) -> None:
    """A trace whose `inductor` event carries Inductor's FX nodes: one row per group with
    both sides' kernels, bytes and time, and under it both compilers' own code side by
    side; an extern call is named, with no code."""
    open_explorer(page, "/diff/inductor_block/inductor")
    rows = page.locator(".compare-table tbody tr")
    expect(rows.first).to_be_visible()
    same = page.locator(".compare-table tbody tr[data-how='same FX nodes']").first
    expect(same).to_contain_text("cpp_red_fused")
    expect(same).to_contain_text("cpp_fused")
    expect(same.locator("td.num").nth(0)).to_have_text(re.compile(r"\d"))  # our bytes
    expect(same.locator("td.num").nth(1)).to_have_text(re.compile(r"\d"))  # Inductor's
    first = page.locator(".compare-code").first
    expect(first.locator(".compare-kernel[data-side=a] pre")).to_contain_text("extern \"C\"")
    expect(first.locator(".compare-kernel[data-side=b] pre")).to_contain_text("#include")
    extern = page.locator(".compare-kernel[data-side=b][data-kernel^='extern_kernels.addmm']")
    assert extern.count() >= 3
    expect(extern.first).to_contain_text("a library call")
    expect(page.locator(".code-diff table.diff-lines")).to_have_count(0)  # no text diff
    screenshot(page, "diff-inductor-structural")
    assert page_errors(page) == []
