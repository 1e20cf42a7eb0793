"""The VS Code extension's webview (extension/dist/webview.js, built from webui/js's panes)
in headless Chromium, outside VS Code: `acquireVsCodeApi` is stubbed, the panel's real HTML
(its CSP included) is served from a fake webview origin, and a recorded trace is posted in
as the extension host would post it. Needs the built extension (`npm run build` in
extension/); in CI a missing build fails instead of skipping.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kernelscope.compiler.compare.traces import diff_json
from kernelscope.server.web import highlight as hl

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[2]
EXT = REPO / "extension"
FIXTURE = REPO / "tests" / "browser" / "fixtures" / "softmax_block.json"
ORIGIN = "https://webview.test"
SCREENSHOTS = REPO / "artifacts" / "screenshots"

# What the extension host looks like to the page: messages it receives are recorded, and
# highlight requests are answered (by the test) through window.__answer.
STUB = """
window.__posted = [];
window.__errors = [];
window.__csp = [];
addEventListener("error", (e) => window.__errors.push(String(e.message)));
addEventListener("unhandledrejection", (e) => window.__errors.push(String(e.reason)));
document.addEventListener("securitypolicyviolation",
  (e) => window.__csp.push(`${e.violatedDirective} ${e.blockedURI}`));
window.__state = %s;
window.acquireVsCodeApi = () => ({
  postMessage: (m) => window.__posted.push(JSON.parse(JSON.stringify(m))),
  getState: () => window.__state ?? undefined,
  setState: (s) => {
    window.__state = JSON.parse(JSON.stringify(s));
    (window.__saves ??= []).push(s.events.length);
  },
});
"""


def _built() -> bool:
    return all((EXT / p).exists() for p in ("dist/webview.js", "dist/webview.css", "out/html.cjs"))


@pytest.fixture(scope="module")
def html() -> str:
    if not _built():
        message = "extension not built: cd extension && npm ci && npm run build"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    parts = {"cspSource": ORIGIN, "scriptUri": f"{ORIGIN}/dist/webview.js",
             "styleUri": f"{ORIGIN}/dist/webview.css", "nonce": "n0nceForTheTest"}
    script = f"process.stdout.write(require('./out/html.cjs').renderHtml({json.dumps(parts)}))"
    return subprocess.run([node, "-e", script], cwd=EXT, capture_output=True, text=True,
                          check=True, timeout=60).stdout


@pytest.fixture
def open_panel(browser: Any, html: str) -> Iterator[Any]:
    contexts: list[Any] = []

    def make(state: Any = None) -> Any:
        context = browser.new_context(viewport={"width": 1500, "height": 900})
        contexts.append(context)

        def route(r: Any) -> None:
            url = r.request.url
            if url in (ORIGIN, ORIGIN + "/"):
                r.fulfill(status=200, content_type="text/html", body=html)
            elif url.startswith(ORIGIN + "/dist/"):
                path = EXT / "dist" / url[len(ORIGIN) + 6:]
                kind = "text/css" if path.suffix == ".css" else "text/javascript"
                r.fulfill(status=200, content_type=kind, body=path.read_bytes())
            else:
                r.abort()

        context.route("**/*", route)
        context.add_init_script(STUB % json.dumps(state))
        page = context.new_page()
        page.goto(ORIGIN + "/")
        page.wait_for_selector("body[data-ready=true]")
        return page

    yield make
    for context in contexts:
        context.close()


def post(page: Any, message: dict[str, Any]) -> None:
    page.evaluate("(m) => window.postMessage(m, '*')", message)


def posted(page: Any, kind: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = page.evaluate("window.__posted")
    return [m for m in messages if m["type"] == kind]


def answer_highlights(page: Any) -> int:
    """Answers the panel's highlight requests with the server's own Pygments HTML."""
    requests = posted(page, "highlight")
    for r in requests:
        post(page, {"type": "highlighted", "id": r["id"],
                    "html": hl.highlight(r["code"], r["language"])})
    return len(requests)


def stream_trace(page: Any) -> dict[str, Any]:
    trace: dict[str, Any] = json.loads(FIXTURE.read_text())
    post(page, {"type": "reset", "title": {"file": "block.py", "region": "function block"}})
    for event in trace["events"]:
        post(page, {"type": "event", "event": event})
    return trace


# The panes the recorded trace fills; the panel also has the web UI's Guards and Output tabs
# (Output stays empty: the fixture did not run Inductor).
PANES = ["code", "graph", "ir", "fusion", "memory", "timings", "guards"]
TABS = ["graph", "ir", "modules", "fusion", "memory", "timings", "guards", "output"]


def wait_filled(page: Any, panes: list[str]) -> None:
    """Each pane filled; a tab's pane renders when first shown, so each is shown in turn
    and the tab showing before is shown again."""
    active = page.evaluate("document.querySelector('#tabs .tab.active')?.dataset.tab ?? null")
    for pane in panes:
        if pane != "code":
            page.click(f"button.tab[data-tab={pane}]")
        page.wait_for_selector(f"[data-pane={pane}][data-filled=true]", state="attached",
                               timeout=60_000)
    if active:
        page.click(f"button.tab[data-tab={active}]")


def test_webview_shows_every_pane_and_provenance(open_panel: Any) -> None:
    page = open_panel()
    assert posted(page, "ready") == [{"type": "ready", "restored": False}]
    trace = stream_trace(page)
    scheduling = next(e for e in trace["events"] if e["stage"] == "scheduling")
    kernels = scheduling["data"]["graphs"][0]["kernels"]

    # Every pane fills from the recorded events; the code pane is highlighted by the host.
    wait_filled(page, PANES)
    assert page.locator(".status .stage.done").count() == 9
    assert page.locator(".status .total.ok").count() == 1
    assert answer_highlights(page) > 0
    page.wait_for_selector(".code[data-highlight=pygments]")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    tabs = page.eval_on_selector_all("button.tab[data-tab]", "els => els.map(e => e.dataset.tab)")
    assert tabs == TABS, "the panel has every analysis tab of the web UI"
    for tab in TABS:
        page.click(f"button.tab[data-tab={tab}]")
        assert page.locator(f"[data-pane={tab}]").is_visible()
        page.screenshot(path=str(SCREENSHOTS / f"extension-webview-{tab}.png"))
    page.click("button.tab[data-tab=graph]")
    page.wait_for_selector("[data-pane=graph] canvas")
    # Laid out by dagre in the panel's worker (a Blob URL its CSP allows), not on its page.
    page.wait_for_selector("body[data-layout=worker]", state="attached")

    # The editor's cursor on a source line marks what it became, in every pane.
    fused = next(k for k in kernels if k["kind"] == "reduction")
    line = fused["lines"][0]
    post(page, {"type": "selectLines", "lines": [line], "pin": True})
    marked = page.locator("[data-pane=code] .cl.hl")
    assert marked.count() > 0
    head_of = f"[data-pane=code] section[data-kernel={fused['name']}] .kernel-head"
    assert page.locator(f"{head_of}.hl").count() == 1
    page.click("button.tab[data-tab=fusion]")
    assert page.locator("[data-pane=fusion] .hl").count() > 0
    page.click("button.tab[data-tab=ir]")
    assert page.locator("[data-pane=ir] .ir-card.hl").count() > 0
    page.click("button.tab[data-tab=graph]")
    page.screenshot(path=str(SCREENSHOTS / "extension-webview.png"))

    # Clicking a kernel reveals its source lines in the editor; a double-click opens it.
    other = next(k for k in kernels if k["kind"] == "pointwise")
    head = page.locator(f"[data-pane=code] section[data-kernel={other['name']}] .kernel-head")
    head.click()
    assert posted(page, "reveal")[-1] == {"type": "reveal", "lines": sorted(other["lines"])}
    assert posted(page, "hover"), "selections are mirrored to the editor"
    head.dblclick()
    opened = posted(page, "openKernel")[-1]
    assert opened == {"type": "openKernel", "gid": 0, "kernel": other["name"]}

    assert page.evaluate("window.__errors") == []
    assert page.evaluate("window.__csp") == [], "nothing the panel loads breaks its CSP"


def test_webview_restores_its_state(open_panel: Any) -> None:
    page = open_panel()
    stream_trace(page)
    wait_filled(page, ["timings"])
    page.click("button.tab[data-tab=memory]")
    state = page.evaluate("window.__state")
    # The events are saved as their JSON text (VS Code's setState stores JSON).
    assert len(json.loads(state["events"])) == 10 and state["tab"] == "memory"

    # A restored panel (the serializer's getState) shows the same trace without any message.
    again = open_panel(state)
    assert posted(again, "ready") == [{"type": "ready", "restored": True}]
    # ...and hands it back, so the host can decorate the editor again after a reload.
    restore = posted(again, "restore")
    assert len(restore) == 1 and len(json.loads(restore[0]["events"])) == 10
    wait_filled(again, PANES)
    assert again.locator("[data-pane=memory]").is_visible()
    assert again.locator("#ks-title").inner_text() == "block.py · function block"
    assert again.evaluate("window.__errors") == []


def _answer_part(page: Any, parts: dict[str, str], key: str) -> None:
    page.wait_for_function(
        "(k) => window.__posted.some((m) => m.type === 'part' && m.key === k)", arg=key)
    post(page, {"type": "part", "trace": "t1", "key": key, "part": parts[key]})  # JSON text


def _code_graphs(page: Any) -> set[int]:
    """The graphs whose kernels the code pane shows."""
    return {int(g) for g in page.eval_on_selector_all(
        "[data-pane=code] section.kernel", "els => els.map((e) => e.dataset.graph)")}


def test_webview_opens_a_big_stored_trace_one_graph_at_a_time(open_panel: Any) -> None:
    """A big stored trace comes as its head (each graph's entries stubs naming its part,
    server/store/parts.py): the panel opens on the first graph, asking the host for that
    graph's part only, and asks for another when its graph tab is shown, as the page does."""
    from kernelscope.server.store.parts import split

    trace = json.loads((FIXTURE.parent / "training.json").read_text())
    parted = split(trace["events"])
    page = open_panel()
    post(page, {"type": "trace", "title": {"file": "trace t1", "region": "permalink"},
                "events": json.dumps(parted.head), "stored": "t1"})  # as the host sends them
    _answer_part(page, parted.parts, "g0")
    page.wait_for_selector("[data-pane=code][data-filled=true]")
    assert _code_graphs(page) == {0}
    assert [m["key"] for m in posted(page, "part")] == ["g0"]
    assert page.locator(".graph-tabs .gtab.active").get_attribute("data-graphs") == "0"
    assert page.locator(".graph-tabs .gtab").count() == 3  # all, forward, backward
    wait_filled(page, ["graph", "ir", "memory"])

    page.click(".graph-tabs .gtab[data-graphs='1']")
    _answer_part(page, parted.parts, "g1")
    page.wait_for_function(
        "() => document.querySelector('.graph-tabs .gtab.active')?.dataset.graphs === '1'")
    assert _code_graphs(page) == {1}
    page.click(".graph-tabs .gtab[data-graphs='all']")  # both here: asked for no more
    page.wait_for_function(
        "() => document.querySelector('.graph-tabs .gtab.active')?.dataset.graphs === 'all'")
    assert _code_graphs(page) == {0, 1}
    assert [m["key"] for m in posted(page, "part")] == ["g0", "g1"]

    # What is saved is the head (its parts are asked for again), and the graphs shown.
    state = page.evaluate("window.__state")
    assert state["stored"] == "t1" and state["graphs"] is None
    assert json.loads(state["events"]) == parted.head
    page.click(".graph-tabs .gtab[data-graphs='1']")
    again = open_panel(page.evaluate("window.__state"))
    assert posted(again, "restore")[0]["stored"] == "t1"
    _answer_part(again, parted.parts, "g1")
    again.wait_for_selector("[data-pane=code][data-filled=true]")
    assert _code_graphs(again) == {1}
    assert [m["key"] for m in posted(again, "part")] == ["g1"]
    assert page.evaluate("window.__errors") == [] and again.evaluate("window.__errors") == []

    # The host sends the part it read ahead with the head: nothing is asked for at open.
    fresh = open_panel()
    post(fresh, {"type": "trace", "title": {"file": "trace t1", "region": "permalink"},
                 "events": json.dumps(parted.head), "stored": "t1",
                 "parts": {"g0": parted.parts["g0"]}})
    fresh.wait_for_selector("[data-pane=code][data-filled=true]")
    assert _code_graphs(fresh) == {0} and posted(fresh, "part") == []
    fresh.click(".graph-tabs .gtab[data-graphs='1']")  # one not sent: asked for
    _answer_part(fresh, parted.parts, "g1")
    fresh.wait_for_function(
        "() => document.querySelector('.graph-tabs .gtab.active')?.dataset.graphs === '1'")
    assert [m["key"] for m in posted(fresh, "part")] == ["g1"]
    assert fresh.evaluate("window.__errors") == []


def test_webview_shows_failures(open_panel: Any) -> None:
    page = open_panel()
    post(page, {"type": "reset", "title": {"file": "a.py", "region": "lines 3-4"}})
    post(page, {"type": "failure", "kind": "network", "message": "cannot reach the server"})
    banner = page.locator(".error-banner")
    assert banner.is_visible() and "cannot reach the server" in banner.inner_text()
    # Messages that are not the protocol's are ignored.
    post(page, {"type": "event"})
    post(page, {"type": "nonsense"})
    assert page.evaluate("window.__errors") == []


def test_webview_compares_two_traces_in_the_diff_pane(open_panel: Any) -> None:
    """The host posts both traces and the server's structural diff (GET /api/diff's
    groups, made here by the same function): the panel shows the diff pane with the
    groups matched by the FX nodes they cover."""
    page = open_panel()
    stream_trace(page)
    cpu = json.loads(FIXTURE.read_text())
    gpu = json.loads((FIXTURE.parent / "h200_softmax.json").read_text())
    groups = diff_json(cpu["events"], gpu["events"])
    assert groups

    def side(trace_id: str, trace: dict[str, Any]) -> dict[str, Any]:
        href = f"http://127.0.0.1:8765/t/{trace_id}"
        return {"id": trace_id, "href": href, "events": trace["events"]}

    message = {"type": "diff", "a": side("CPU1", cpu), "b": side("GPU1", gpu), "groups": groups}
    post(page, message)
    diff = page.locator("[data-pane=diff][data-filled=true]")
    assert diff.is_visible()
    assert "CPU1" in diff.inner_text() and "GPU1" in diff.inner_text()
    assert "triton_per_fused_amax_sub_exp_sum_div_0" in diff.inner_text()
    rows = diff.locator(".diff-group-table tbody tr")
    assert rows.evaluate_all("rs => rs.map(r => r.dataset.how)") == [g["how"] for g in groups]
    fused = diff.locator(".diff-group-table tr[data-how='B fuses more']")
    assert fused.get_attribute("data-nodes") == ",".join(groups[-1]["nodes"])
    assert not page.locator(".ks-workspace").is_visible()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "extension-webview-diff.png"))
    page.click("#ks-diff-close")
    assert page.locator(".ks-workspace").is_visible()
    assert page.locator("[data-pane=code][data-filled=true]").count() == 1
    # A new compile while the diff shows goes back to the trace view.
    post(page, message)
    stream_trace(page)
    assert page.locator(".ks-workspace").is_visible()
    assert page.evaluate("window.__errors") == []
    assert page.evaluate("window.__csp") == []


def test_webview_shows_inductor_as_a_follow_up_running_filled_and_lost(open_panel: Any) -> None:
    """`done` lists Inductor as a follow-up: the panel says it still runs until the host,
    polling the server, posts its stored event (or says it was lost); the saved state keeps
    a lost one lost."""
    trace: dict[str, Any] = json.loads(FIXTURE.read_text())
    done = trace["events"][-1]
    done["data"].update(trace_id="TRACE1", follow_ups=["inductor"],
                        follow_ups_until=4e9)
    inductor = {"schema": 1, "seq": done["seq"] + 1, "stage": "inductor", "ms": 1234,
                "data": {"measured": True, "device": "cpu", "inductor_ms": 0.0456,
                         "reason": None, "code": ["# inductor"],
                         "kernels": [{"name": "cpp_fused__softmax_0", "language": "cpp",
                                      "source": "// inductor", "ms": 0.0123}]}}
    title = {"file": "block.py", "region": "function block"}
    page = open_panel()
    post(page, {"type": "reset", "title": title})
    for event in trace["events"]:
        post(page, {"type": "event", "event": event})
    post(page, {"type": "followUps", "states": {"inductor": "running"}, "events": []})
    page.click("button.tab[data-tab=timings]")
    running = page.locator("[data-pane=timings] .inductor[data-state=running]")
    assert "Inductor: running…" in running.inner_text()
    pending = page.locator(".status .follow-ups")
    assert pending.inner_text() == "inductor still running · added to this trace when it ends"
    chip = page.locator(".status .stage[data-stage=inductor]")
    assert "running" in (chip.get_attribute("class") or "")

    post(page, {"type": "followUps", "states": {"inductor": "done"}, "events": [inductor]})
    row = page.locator("[data-pane=timings] .inductor[data-state=done] "
                       "tr[data-kernel=cpp_fused__softmax_0] .mini-val")
    assert row.inner_text() != "–"
    assert not pending.is_visible()
    assert "done" in (chip.get_attribute("class") or "")
    assert page.evaluate("JSON.parse(window.__state.events).at(-1).stage") == "inductor"

    # A follow-up the server lost: said in the strip and the pane, and after a restore.
    post(page, {"type": "reset", "title": title})
    for event in trace["events"]:
        post(page, {"type": "event", "event": event})
    post(page, {"type": "followUps", "states": {"inductor": "lost"}, "events": []})
    lost = page.locator("[data-pane=timings] .inductor[data-state=lost]")
    assert "Inductor: did not finish" in lost.inner_text()
    assert pending.inner_text() == "inductor did not finish"
    state = page.evaluate("window.__state")
    again = open_panel(state)
    assert posted(again, "restore")[0]["followUps"] == {"inductor": "lost"}
    again.click("button.tab[data-tab=timings]")
    assert again.locator("[data-pane=timings] .inductor[data-state=lost]").count() == 1
    assert again.locator(".status .follow-ups").inner_text() == "inductor did not finish"
    assert page.evaluate("window.__errors") == [] and again.evaluate("window.__errors") == []
    assert page.evaluate("window.__csp") == []


def test_webview_saves_a_stream_once_not_per_event(open_panel: Any) -> None:
    """A streamed compile is saved when it is done (and while it streams, at most every
    half second), each save adding the new events to the text saved before: a save per
    event sent the whole trace to the host each time, quadratic in a model's compile. The
    events are posted in one task, so no put-off save can come between them."""
    trace: dict[str, Any] = json.loads(FIXTURE.read_text())
    events = trace["events"]
    assert events[-1]["stage"] == "done"
    dispatch = """(ms) => { for (const m of ms) window.dispatchEvent(
        new MessageEvent("message", { data: m })); }"""
    page = open_panel()
    title = {"file": "block.py", "region": "function block"}
    page.evaluate(dispatch, [{"type": "reset", "title": title},
                             *({"type": "event", "event": e} for e in events[:5])])
    assert page.evaluate("window.__saves") == [2]  # the reset's; the events' are put off
    page.wait_for_function("() => window.__saves.length === 2")  # half a second later
    assert json.loads(page.evaluate("window.__state.events")) == events[:5]
    page.evaluate(dispatch, [{"type": "event", "event": e} for e in events[5:]])
    saves = page.evaluate("window.__saves")
    assert len(saves) == 3, saves  # `done`'s, at once
    assert json.loads(page.evaluate("window.__state.events")) == events
    page.click("button.tab[data-tab=memory]")  # a save with no new event: the same text
    assert page.evaluate("window.__state.tab") == "memory"
    assert json.loads(page.evaluate("window.__state.events")) == events
    assert page.evaluate("window.__errors") == []


def test_webview_opens_a_model_trace(open_panel: Any) -> None:
    """The 6-block Llama-style training step (tests/browser/test_model_traces.py opens it in
    the web UI) in the panel: the same panes fill, the graph folded by module."""
    from stub_server import load_fixture

    page = open_panel()
    events = load_fixture("llama6_train")["events"]
    post(page, {"type": "trace", "title": {"file": "llama.py", "region": "function step"},
                "events": events})
    page.wait_for_selector("[data-pane=code][data-filled=true]", timeout=60_000)
    codegen = next(e for e in events if e["stage"] == "codegen")["data"]
    kernels = sum(len(g["kernels"]) for g in codegen["graphs"])
    assert page.locator("[data-pane=code] .toc .chip").count() == kernels
    wait_filled(page, ["graph", "ir", "modules", "fusion", "memory", "timings"])
    page.click("button.tab[data-tab=graph]")
    page.wait_for_function("() => { const p = document.querySelector('[data-pane=graph]');"
                           " return p.dataset.filled === 'true' && !p.dataset.pending; }",
                           timeout=60_000)
    labels = page.evaluate("window.kernelscope.panes.find((p) => p.id === 'graph')"
                           ".fx.nodes('.group').map((n) => n.data('label'))")
    assert any(label.startswith("model.layers.0-5 ×6") for label in labels), labels
    page.screenshot(path=str(SCREENSHOTS / "extension-webview-llama6.png"))
    assert page.evaluate("window.__errors") == []
    assert page.evaluate("window.__csp") == []
