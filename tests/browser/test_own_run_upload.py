"""Your own run in the browser, against the real server: "Open run…" uploads a recorded
trace folder (`kernelscope run` on a tiny script), the page opens the stored trace's
permalink with the run panel (graphs, compiles, graph breaks, call sites); files from
other versions open with a notice naming both versions; an unknown format version and a
malformed file are refused with the server's reason in the banner, and the server stays
up. Screenshots at 1440x900 and 1920x1080."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from browser_support import LiveServer, page_errors, screenshot
from own_run_support import files_of, record_run, with_versions
from playwright.sync_api import Page, expect
from ui import open_explorer, wait_done

pytestmark = pytest.mark.browser

SIZES = [(1440, 900), (1920, 1080)]
UPLOAD_WAIT_MS = 60_000  # the server opens each upload in a process of its own


@pytest.fixture(scope="module")
def trace_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return record_run(tmp_path_factory.mktemp("browser-run"))


def _write(files: list[dict[str, str]], folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for f in files:
        (folder / f["name"]).write_text(f["text"])
    return folder


def _upload(page: Page, folder: Path) -> None:
    """What picking the folder in the dialog does."""
    page.set_input_files("#open-run-files", folder)


def _opened(page: Page, folder: Path) -> None:
    _upload(page, folder)
    page.wait_for_url("**/t/*", timeout=UPLOAD_WAIT_MS)
    page.wait_for_selector("body[data-ready=true]")
    wait_done(page)


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_open_run_uploads_and_shows_the_recorded_run(
        new_page: Callable[[str], Page], live_server: LiveServer, trace_dir: Path,
        size: tuple[int, int]) -> None:
    page = new_page(live_server.url)
    page.set_viewport_size({"width": size[0], "height": size[1]})
    open_explorer(page)
    (trace_dir / "older").mkdir(exist_ok=True)  # a subfolder's files are not this run's
    (trace_dir / "older" / "x.json").write_text("{ not json")
    _opened(page, trace_dir)
    ident = page.url.rsplit("/t/", 1)[1]
    stored = json.loads(page.evaluate(f"fetch('/api/traces/{ident}').then(r => r.text())"))
    assert stored["options"]["recorded"]["graphs"] == 4
    panel = page.locator(".run-panel")
    expect(panel).to_be_visible()
    expect(panel.locator(".run-tag")).to_have_text("Recorded run")
    expect(panel.locator(".run-summary")).to_contain_text(
        "4 graphs of 4 Dynamo compiles · 2 recompiles · 2 graph breaks")
    expect(panel.locator(".version-notice")).to_have_count(0)  # recorded here
    expect(panel.locator(".run-config")).to_have_text("config: dynamo.recompile_limit=4")
    panel.locator(".run-compiles summary").click()
    rows = panel.locator(".run-compiles tr[data-compile]")
    expect(rows).to_have_count(4)
    # compile 0/0: called at line 9, torch.compile at line 8, broken at the print (line 5).
    first = rows.first.locator("td")
    expect(first.nth(1)).to_have_text("mine.py:9")
    expect(first.nth(2)).to_have_text("mine.py:8")
    expect(first.nth(3)).to_contain_text("mine.py:5")
    expect(page.locator(".cm-content")).to_contain_text("def f(x):")
    assert page.locator(".graph-tabs .gtab").count() == 5  # all + one per graph
    page.wait_for_selector("[data-pane=code][data-filled=true]", state="attached")
    screenshot(page, f"own-run-upload-{size[0]}x{size[1]}")
    assert page_errors(page) == []


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_a_run_from_other_versions_says_so(
        new_page: Callable[[str], Page], live_server: LiveServer, trace_dir: Path, tmp_path: Path,
        size: tuple[int, int]) -> None:
    other = with_versions(files_of(trace_dir), torch="2.9.1+cu128", kernelscope="0.0.7")
    page = new_page(live_server.url)
    page.set_viewport_size({"width": size[0], "height": size[1]})
    open_explorer(page)
    _opened(page, _write(other, tmp_path / "other"))
    health = json.loads(page.evaluate("fetch('/api/health').then(r => r.text())"))["versions"]
    notice = page.locator(".run-panel .version-notice")
    expect(notice).to_be_visible()
    expect(notice).to_contain_text("Recorded with torch 2.9.1+cu128, kernelscope 0.0.7")
    expect(notice).to_contain_text(
        f"this server runs torch {health['torch']}, kernelscope {health['kernelscope']}")
    page.wait_for_selector("[data-pane=code][data-filled=true]", state="attached")
    screenshot(page, f"own-run-other-version-{size[0]}x{size[1]}")
    assert page_errors(page) == []


def test_unknown_format_and_malformed_files_are_refused_in_the_banner(
        new_page: Callable[[str], Page], live_server: LiveServer, trace_dir: Path,
        tmp_path: Path) -> None:
    page = new_page(live_server.url)
    page.set_viewport_size({"width": 1440, "height": 900})
    open_explorer(page)
    future = with_versions(files_of(trace_dir), version=2, kernelscope="0.3.0")
    _upload(page, _write(future, tmp_path / "future"))
    banner = page.locator(".error-banner")
    expect(banner).to_be_visible(timeout=UPLOAD_WAIT_MS)
    expect(banner).to_contain_text("format version 2 is unknown")
    expect(banner).to_contain_text("written by kernelscope 0.3.0")
    assert page.url.endswith("/")
    screenshot(page, "own-run-refused-1440x900")
    bad = tmp_path / "bad" / "graph.json"
    bad.parent.mkdir()
    bad.write_text("{ not json")
    _upload(page, bad.parent)
    expect(banner).to_contain_text("graph.json: not JSON", timeout=UPLOAD_WAIT_MS)
    expect(page.locator("#open-run")).to_be_enabled()
    health = page.evaluate("fetch('/api/health').then(r => r.status)")
    assert health == 200
    assert page_errors(page) == []
