"""What the page shows before the whole result is there. The Inductor comparison is a
follow-up (server/jobs/followups.py): `done` and the permalink arrive with our own result, the
page says Inductor is still running, and both the page that compiled and a permalink
opened meanwhile fill in Inductor's times once it is stored. A cold job's first `source`
is the server's (server/jobs/early.py). The stub holds a stage until released (order, not
timing)."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from browser_support import LiveServer, page_errors, screenshot
from playwright.sync_api import Page, expect
from stub_server import load_fixture
from ui import open_explorer, show_tab, turn_on_inductor, wait_done

pytestmark = pytest.mark.browser


def inductor_kernel() -> str:
    profile = next(e["data"] for e in load_fixture("add_relu")["events"]
                   if e["stage"] == "profile")
    name: str = profile["inductor"]["kernels"][0]["name"]
    return name


def running_inductor(page: Page) -> None:
    show_tab(page, "timings")
    expect(page.locator(".timings-pane .inductor[data-state=running]")).to_contain_text(
        "Inductor: running…")


def filled_inductor(page: Page) -> None:
    row = page.locator(
        f".timings-pane .inductor[data-state=done] tr[data-kernel={inductor_kernel()}]")
    expect(row.locator(".mini-val")).not_to_have_text("–")
    expect(page.locator(".stage[data-stage=inductor]")).to_have_class(re.compile(r"\bdone\b"))
    expect(page.locator(".status .follow-ups")).to_be_hidden()


def test_done_and_the_permalink_come_first_and_inductor_fills_in_both_pages(
    page: Page, new_page: Callable[[str], Page], stub: LiveServer
) -> None:
    page.set_viewport_size({"width": 1440, "height": 900})
    page.request.post("/stub/hold/inductor")
    try:
        open_explorer(page)
        page.select_option("#samples", "add_relu")
        turn_on_inductor(page)
        page.click("#compile")
        wait_done(page, timeout_s=10)  # while Inductor is held
        done = page.evaluate("window.kernelscope.state.trace.done")
        assert done["follow_ups"] == ["inductor"] and done["ok"] is True
        expect(page.locator("#share")).to_be_enabled()
        running_inductor(page)
        expect(page.locator(".timings-pane .inductor")).to_contain_text("permalink")
        pending = page.locator(".status .follow-ups")
        expect(pending).to_have_text("inductor still running · added to this trace when it ends")
        expect(page.locator(".stage[data-stage=inductor]")).to_have_class(
            re.compile(r"\brunning\b"))
        screenshot(page, "follow-up-running-1440x900")

        # A permalink opened while Inductor runs says so too.
        other = new_page(stub.url)
        other.set_viewport_size({"width": 1920, "height": 1080})
        open_explorer(other, f"/t/{done['trace_id']}")
        running_inductor(other)
        expect(other.locator(".status .follow-ups")).to_be_visible()
        screenshot(other, "follow-up-permalink-running-1920x1080")
    finally:
        page.request.post("/stub/release")
    filled_inductor(page)
    filled_inductor(other)
    expect(page.locator("#diff-inductor")).to_be_visible()
    screenshot(page, "follow-up-filled-1440x900")
    assert page_errors(page) == [] and page_errors(other) == []


def test_a_follow_up_that_never_came_says_it_did_not_finish(page: Page) -> None:
    open_explorer(page, "/t/inductor_lost")
    show_tab(page, "timings")
    lost = page.locator(".timings-pane .inductor[data-state=lost]")
    expect(lost).to_contain_text("Inductor: did not finish")
    expect(page.locator(".status .follow-ups")).to_have_text("inductor did not finish")
    expect(page.locator(".stage[data-stage=inductor]")).to_have_class(re.compile(r"\bfailed\b"))
    assert page_errors(page) == []


def test_a_cold_job_shows_its_code_at_once_and_its_inputs_once_the_snippet_ran(
    page: Page,
) -> None:
    """The server's own `source` (server/jobs/early.py) comes while a cold worker imports
    torch: the status says so and the lines are the code's; the worker's own `source`
    then gives the entry and its inputs (the stub holds that one until released)."""
    page.set_viewport_size({"width": 1440, "height": 900})
    page.request.post("/stub/cold/on")
    page.request.post("/stub/hold/source")
    try:
        open_explorer(page)
        page.select_option("#samples", "add_relu")
        page.click("#compile")
        info = page.locator(".status .source-info")
        expect(info.locator(".starting")).to_contain_text("importing torch")
        expect(page.locator(".stage[data-stage=source]")).to_have_class(
            re.compile(r"\bdone\b"))
        early = page.evaluate("window.kernelscope.state.trace.events.map(e => e.origin)")
        assert early == ["server"]
        screenshot(page, "cold-source-1440x900")
    finally:
        page.request.post("/stub/release")
        page.request.post("/stub/cold/off")
    wait_done(page)
    expect(info.locator("code")).to_contain_text("add_relu(x: float32[4096]")
    expect(info.locator(".starting")).to_have_count(0)
    assert page_errors(page) == []
