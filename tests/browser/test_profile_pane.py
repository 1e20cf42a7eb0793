"""The Timings pane on a recorded profile (fixtures/profile_block.json, the transformer
block sample): every row of the compiled call and of eager's, their coverage and the
unaccounted row, sort and search, the rollups, ours against eager, the conditions and
the Chrome trace export."""

from __future__ import annotations

import json

import pytest
from browser_support import page_errors
from playwright.sync_api import Page, expect
from stub_server import load_fixture
from ui import open_explorer, show_tab, wait_done

pytestmark = pytest.mark.browser


def _profile() -> dict:
    return next(e["data"] for e in load_fixture("profile_block")["events"]
                if e["stage"] == "profile")


def _opened(page: Page) -> Page:
    open_explorer(page, "/t/profile_block")
    wait_done(page)
    show_tab(page, "timings")
    page.wait_for_selector(".profile-rows-table tbody tr")
    return page


def _row_names(page: Page) -> list[str]:
    return page.eval_on_selector_all(".profile-rows-table tbody tr",
                                     "els => els.map(e => e.dataset.row)")


def test_rows_open_hottest_first_with_coverage_and_unaccounted(page: Page) -> None:
    _opened(page)
    ours = _profile()["ours"]
    hottest = sorted(ours["rows"], key=lambda r: -r["time"]["ms"])
    names = _row_names(page)
    assert names == [r["name"] for r in hottest][:len(names)]
    assert len(names) == min(25, len(hottest))
    pct = f"{100 * ours['coverage']:.1f}%"
    expect(page.locator(".coverage")).to_contain_text(f"Rows cover {pct}")
    kinds = page.eval_on_selector_all(".profile-rows-table tbody tr",
                                      "els => els.map(e => e.dataset.kind)")
    assert "extern" in kinds and "wrapper" in kinds and "unaccounted" in kinds
    expect(page.locator(".conditions")).to_contain_text("1 thread pinned to CPU")
    expect(page.locator(".peak-memory")).to_contain_text("Kernelscope")
    assert page_errors(page) == []


def test_rows_sort_and_search(page: Page) -> None:
    _opened(page)
    page.fill(".row-search", "mkl")
    names = _row_names(page)
    assert names and all(n.startswith("extern_") for n in names)
    page.fill(".row-search", "")
    page.click("th.sortable[data-key=name]")
    names = _row_names(page)
    assert names == sorted(names)


def test_eager_rows_rollups_and_comparison(page: Page) -> None:
    _opened(page)
    page.click(".row-tab[data-side=eager]")
    kinds = page.eval_on_selector_all(".profile-rows-table tbody tr",
                                      "els => els.map(e => e.dataset.kind)")
    assert "op" in kinds
    expect(page.locator(".rollup-table[data-by=module] tr[data-key=fc1]")).to_have_count(1)
    assert page.locator(".op-compare-table tbody tr").count() >= 5


def test_the_profile_exports_as_a_chrome_trace(page: Page) -> None:
    _opened(page)
    with page.expect_download() as info:
        page.click(".export-trace")
    trace = json.loads(open(info.value.path()).read())
    names = {e["name"] for e in trace["traceEvents"] if e["ph"] == "X"}
    kernels = {r["name"] for r in _profile()["ours"]["rows"] if r["kind"] == "kernel"}
    assert kernels <= names and "wrapper" in names
    expect(page.locator(".export-repro")).to_have_text(["graph 0 (inference) (.py)"])


def _with_kernel_time(name: str, trace_id: str, ms: float, p10: float, p90: float) -> dict:
    stored = load_fixture(name)
    stored["id"] = trace_id
    for e in stored["events"]:
        if e["stage"] == "profile":
            for k in e["data"]["kernels"]:
                k["ms"], k["time"] = ms, {"ms": ms, "p10": p10, "p90": p90, "repeats": 7,
                                          "noisy": False}
    return stored


@pytest.mark.parametrize(("b", "change"), [((0.091, 0.085, 0.1), ""),
                                           ((0.05, 0.049, 0.051), "faster")])
def test_the_diff_colours_a_change_only_outside_both_spreads(
        page: Page, b: tuple[float, float, float], change: str) -> None:
    """The same kernel, -9% inside the spreads: no colour; halved beyond them: green."""
    a = _with_kernel_time("add_relu", "spread-a", 0.1, 0.09, 0.12)
    other = _with_kernel_time("add_relu", "spread-b", *b)
    page.route("**/api/traces/spread-a", lambda route: route.fulfill(json=a))
    page.route("**/api/traces/spread-b", lambda route: route.fulfill(json=other))
    # the server's grouping by FX node is add_relu's against itself (the same kernels)
    page.route("**/api/diff/spread-a/spread-b", lambda route: route.fulfill(
        response=route.fetch(url=route.request.url.replace("spread-a/spread-b",
                                                           "add_relu/add_relu"))))
    open_explorer(page, "/diff/spread-a/spread-b")
    row = page.locator("[data-pane=diff][data-filled=true] .diff-kernels tbody tr").first
    expect(row).to_have_attribute("data-change", change)
    expect(row.locator("td.delta.faster")).to_have_count(1 if change else 0)
