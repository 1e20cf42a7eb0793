"""A big trace opened through the real server, which stores and serves it in parts (docs/
server.md, "A model's trace and TRACE_LIMIT_MB"): the GPT-2-small-shaped training step
(14.2 MB of events, over TRACE_LIMIT_MB) put in the server's store as a job's trace is. Its
permalink opens on the first graph, asking for that graph's part only; another graph's
part is asked for when its tab is shown, and "all" asks for the rest."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_support import REPO, STORED_ONLY, LiveServer, live_app, page_errors, screenshot
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.browser

GPT2 = REPO / "tests" / "browser" / "fixtures" / "gpt2_train.json.gz"
LLAMA6 = REPO / "tests" / "browser" / "fixtures" / "llama6_train.json.gz"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveServer, str, Any]]:
    trace = json.loads(gzip.open(GPT2).read())
    done = trace["events"][-1]
    done["data"].pop("trace_id", None)
    with live_app(tmp_path_factory.mktemp("parted"), **STORED_ONLY) as live:
        store = live.app.extensions["kernelscope"].store
        ident = store.put(trace["code"], trace["options"], trace["events"], True)
        yield live, ident, {e["stage"]: e["data"] for e in trace["events"]}


def _parts_asked(page: Page) -> list[str]:
    return list(page.evaluate("window.__parts"))


def _watch_parts(page: Page) -> None:
    page.add_init_script(
        "window.__parts = []; const f = window.fetch; window.fetch = (u, ...a) => {"
        " if (String(u).includes('/parts/'))"
        "  window.__parts.push(String(u).split('/').pop().split('?')[0]);"
        " return f(u, ...a); };")


def test_a_parted_trace_opens_one_graph_at_a_time(
        new_page: Callable[[str], Page], served: tuple[LiveServer, str, Any],
        tmp_path: Path) -> None:
    server, ident, events = served
    page = new_page(server.url)
    _watch_parts(page)
    page.goto(f"/t/{ident}")
    page.wait_for_selector("[data-pane=code][data-filled=true]", timeout=60_000)
    kernels = [len(g["kernels"]) for g in events["codegen"]["graphs"]]
    chips = page.locator(".code-pane .toc .chip")
    expect(chips).to_have_count(kernels[0], timeout=30_000)  # the forward graph's
    assert _parts_asked(page) == ["g0"]
    expect(page.locator(".graph-tabs .gtab.active")).to_have_attribute("data-graphs", "0")
    expect(page.locator(".graph-tabs .gtab")).to_have_count(4)  # all + three graphs
    for tab in ("graph", "ir", "memory"):
        page.click(f"#tabs .tab[data-tab={tab}]")
        page.wait_for_selector(f"[data-pane={tab}][data-filled=true]", timeout=60_000)
    page.click(".graph-tabs .gtab[data-graphs='1']")
    expect(chips).to_have_count(kernels[1], timeout=30_000)  # the backward graph's
    assert _parts_asked(page) == ["g0", "g1"]
    page.click(".graph-tabs .gtab[data-graphs='all']")
    expect(chips).to_have_count(sum(kernels), timeout=60_000)
    assert sorted(_parts_asked(page)) == ["g0", "g1", "g2"]
    page.click(".graph-tabs .gtab[data-graphs='0']")  # loaded once: asked for no more
    expect(chips).to_have_count(kernels[0], timeout=30_000)
    assert len(_parts_asked(page)) == 3
    screenshot(page, "parted-gpt2")
    assert page_errors(page) == []


def test_a_big_trace_stored_whole_opens_one_graph_at_a_time(
        new_page: Callable[[str], Page], tmp_path: Path) -> None:
    """The 6-block training step (3.2 MB, under TRACE_LIMIT_MB) is stored whole; the page asks
    for it split as it is read (`?split=1`, server/store/readsplit.py), so it opens as a
    trace stored in parts does: on its forward graph, the backward graph's part asked for
    when its tab is shown."""
    trace = json.loads(gzip.open(LLAMA6).read())
    events = {e["stage"]: e["data"] for e in trace["events"]}
    kernels = [len(g["kernels"]) for g in events["codegen"]["graphs"]]
    with live_app(tmp_path, **STORED_ONLY) as live:
        store = live.app.extensions["kernelscope"].store
        ident = store.put(trace["code"], trace.get("options", {}), trace["events"], True)
        assert not store.stored_head(ident).fields.get("parts")  # stored whole
        page = new_page(live.url)
        _watch_parts(page)
        page.goto(f"/t/{ident}")
        page.wait_for_selector("[data-pane=code][data-filled=true]", timeout=60_000)
        chips = page.locator(".code-pane .toc .chip")
        expect(chips).to_have_count(kernels[0], timeout=30_000)
        assert _parts_asked(page) == ["g0"]
        expect(page.locator(".graph-tabs .gtab.active")).to_have_attribute("data-graphs", "0")
        page.click(".graph-tabs .gtab[data-graphs='1']")
        expect(chips).to_have_count(kernels[1], timeout=30_000)
        page.click(".graph-tabs .gtab[data-graphs='all']")
        expect(chips).to_have_count(sum(kernels), timeout=30_000)
        assert _parts_asked(page) == ["g0", "g1"]
        assert page_errors(page) == []
