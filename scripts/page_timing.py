"""How fast a stored model trace opens in the explorer, measured in headless Chromium.

    PYTHONPATH=$PWD python scripts/page_timing.py [--runs 3] [--fixture NAME ...]
                                                  [--json FILE] [--webui DIR] [--log LOG]

Stores each fixture trace (tests/browser/fixtures/NAME.json or NAME.json.gz) in a temporary
database of the real server (the app `kernelscope serve` runs, no workers started), opens
its permalink `/t/<id>` in a fresh Chromium context and measures, in the page:

- `open`: navigation start to the first frame with the code pane filled;
- `ready`: to the first frame with the tab shown at open filled and settled;
- each tab's first show: its click to the first frame with its pane filled and settled
  (a pane marks pending work, such as a graph layout, with `data-pending`);
- the longest main-thread task (a PerformanceObserver for `longtask`, tasks over 50 ms)
  during the open and during each tab's first show.

Each figure is the median over `--runs` fresh page loads; the largest over runs is
printed beside it. `--webui DIR` serves another checkout's webui/ (an earlier commit's,
for a before-and-after on the same host). `--log LOG` opens a TORCH_TRACE log as `kernelscope
open` does (read, split into its head and one part per compile id, stored; the seconds each
takes printed) and measures its page instead of the fixtures. This is a benchmark: it prints
numbers and asserts nothing (tests/browser/test_model_traces.py checks the same pages'
structure).
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "browser" / "fixtures"
CHROMIUM = os.environ.get("KERNELSCOPE_CHROMIUM", "/usr/bin/chromium")
DEFAULT = ["modules", "llama6_train", "gpt2_train"]
VIEWPORT = {"width": 1600, "height": 950}
SETTLE_TIMEOUT_MS = 60_000

# Long tasks from the page's first moment; `__mark` reads the clock in the page.
OBSERVE = """
window.__long = [];
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) window.__long.push([e.startTime, e.duration]);
}).observe({ type: "longtask", buffered: true });
new MutationObserver((_, seen) => {
  if (!document.querySelector(".log-panel")) return;
  window.__indexAt = performance.now();
  seen.disconnect();
}).observe(document, { childList: true, subtree: true });
"""
# True on the first frame where the pane is filled and nothing in it is pending.
SETTLED = """(sel) => {
  const el = document.querySelector(sel);
  if (!el || el.dataset.filled !== "true" || el.querySelector("[data-pending]")
      || el.dataset.pending) return false;
  window.__at = performance.now();
  return true;
}"""
CLICK = """(tab) => {
  window.__t0 = performance.now();
  document.querySelector(`#tabs [data-tab="${tab}"]`).click();
}"""
LONGEST = """([from, to]) => Math.max(0, ...window.__long
  .filter(([start]) => start >= from - 1 && start <= to).map(([, d]) => d))"""


def load_fixture(name: str) -> dict[str, Any]:
    plain = FIXTURES / f"{name}.json"
    if plain.exists():
        trace: dict[str, Any] = json.loads(plain.read_text())
    else:
        trace = json.loads(gzip.decompress((FIXTURES / f"{name}.json.gz").read_bytes()))
    return trace


def store_fixtures(app: Any, names: list[str], tag: str = "") -> dict[str, str]:
    """Puts each fixture in the app's store as a finished trace; name -> trace id. `tag`,
    added at the end of the code, makes another copy (another id) of the same trace."""
    from kernelscope.server.state import of

    store = of(app).store
    ids = {}
    for name in names:
        trace = load_fixture(name)
        events = [e for e in trace["events"] if e["stage"] != "done"]
        done = {"schema": 1, "seq": len(events), "stage": "done", "ms": 0,
                "data": {"ok": True}}
        events = [{**e, "seq": i} for i, e in enumerate(events)] + [done]
        ids[name] = store.put(trace["code"] + tag, trace.get("options", {}), events, True)
    return ids


def store_log(app: Any, path: Path) -> str:
    """A TORCH_TRACE log stored as `kernelscope open` stores it (server/open_cmd.py), with
    how long reading and storing it took."""
    from kernelscope.compiler.trace.torch_trace_events import open_log
    from kernelscope.server.state import of
    from kernelscope.server.web.uploads import conformed, within_limit

    start = time.perf_counter()
    read = conformed(open_log(path, read_source=False))
    read_s = time.perf_counter() - start
    stored = within_limit(read, int(app.config["TRACE_LIMIT_MB"]) << 20)
    ident: str = of(app).store.put(read.code, read.options, stored, True)
    print(f"{path.name}: {path.stat().st_size / 1e6:.1f} MB read in {read_s:.1f} s, split and "
          f"stored in {time.perf_counter() - start - read_s:.1f} s", flush=True)
    return ident


# When the run panel of a log's trace (its index: compile ids, recompiles, graphs) was first
# in the page (OBSERVE's MutationObserver notes it).
INDEX = "() => window.__indexAt ?? null"


class Server:
    """The real app on a loopback port, from a background thread."""

    def __init__(self, app: Any) -> None:
        from werkzeug.serving import make_server

        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        self.server = make_server("127.0.0.1", 0, app, threaded=True)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()


def measure(browser: Any, url: str) -> dict[str, Any]:
    """One fresh page load of `url` and the first show of every tab, offline (the CDN copy
    of cytoscape is refused at once, so the page uses the vendored copy)."""
    context = browser.new_context(viewport=VIEWPORT)
    context.add_init_script(OBSERVE)
    base = url.split("/t/")[0]
    context.route("**/*", lambda route: (
        route.continue_() if route.request.url.startswith(base) else route.abort()))
    page = context.new_page()
    try:
        page.goto(url)
        page.wait_for_function(SETTLED, arg='[data-pane="code"]', polling="raf",
                               timeout=SETTLE_TIMEOUT_MS)
        opened = page.evaluate("window.__at")
        index = None
        if page.locator(".log-panel").count():  # a TORCH_TRACE log: its run panel, the index
            index = page.evaluate(INDEX)
        first = page.evaluate("document.querySelector('#tabs .tab.active').dataset.tab")
        page.wait_for_function(SETTLED, arg=f'[data-pane="{first}"]', polling="raf",
                               timeout=SETTLE_TIMEOUT_MS)
        ready = page.evaluate("window.__at")
        page.wait_for_timeout(300)
        row: dict[str, Any] = {"open": opened, "ready": ready,
                               "open_task": page.evaluate(LONGEST, [0, ready]), "tabs": {}}
        if index is not None:
            row["index"] = index
            row["index_task"] = page.evaluate(LONGEST, [0, index])
        tabs = page.evaluate("[...document.querySelectorAll('#tabs [data-tab]')]"
                             ".map((b) => b.dataset.tab)")
        for tab in tabs:
            if tab == first:
                continue
            page.evaluate(CLICK, tab)
            try:
                page.wait_for_function(SETTLED, arg=f'[data-pane="{tab}"]', polling="raf",
                                       timeout=SETTLE_TIMEOUT_MS // 6)
                at = page.evaluate("window.__at")
            except Exception:  # a pane with nothing to show stays empty
                at = None
            t0 = page.evaluate("window.__t0")
            page.wait_for_timeout(300)
            end = at if at is not None else page.evaluate("performance.now()")
            row["tabs"][tab] = {"show": None if at is None else at - t0,
                                "task": page.evaluate(LONGEST, [t0, end])}
        row["longest"] = page.evaluate("Math.max(0, ...window.__long.map(([, d]) => d))")
        errors = page.evaluate("window.__errors ?? []")
        row["errors"] = errors
        return row
    finally:
        context.close()


def median(values: list[float | None]) -> tuple[float | None, float | None]:
    got = [v for v in values if v is not None]
    return (statistics.median(got), max(got)) if got else (None, None)


def fmt(pair: tuple[float | None, float | None]) -> str:
    mid, top = pair
    return "–" if mid is None else f"{mid:7.0f} ({top:.0f})"


def report(name: str, size: int, runs: list[dict[str, Any]]) -> list[str]:
    lines = [f"## {name}  ({size / 1e6:.1f} MB as served, {len(runs)} runs; "
             "median ms (max))", ""]
    lines.append(f"{'what':28} {'time':>16} {'longest task':>16}")
    lines.append(f"{'open (code pane filled)':28} {fmt(median([r['open'] for r in runs])):>16} "
                 f"{fmt(median([r['open_task'] for r in runs])):>16}")
    if "index" in runs[0]:
        lines.append(f"{'index (run panel drawn)':28} "
                     f"{fmt(median([r['index'] for r in runs])):>16} "
                     f"{fmt(median([r['index_task'] for r in runs])):>16}")
    lines.append(f"{'ready (first tab settled)':28} "
                 f"{fmt(median([r['ready'] for r in runs])):>16} {'':>16}")
    for tab in runs[0]["tabs"]:
        shows = [r["tabs"][tab]["show"] for r in runs]
        tasks = [r["tabs"][tab]["task"] for r in runs]
        lines.append(f"{'first show: ' + tab:28} {fmt(median(shows)):>16} "
                     f"{fmt(median(tasks)):>16}")
    lines.append(f"{'longest task, whole visit':28} {'':>16} "
                 f"{fmt(median([r['longest'] for r in runs])):>16}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--fixture", action="append", dest="fixtures")
    parser.add_argument("--json", type=Path, help="also write every run's numbers here")
    parser.add_argument("--webui", type=Path, help="serve this webui/ folder instead")
    parser.add_argument("--log", type=Path, help="a TORCH_TRACE log to open instead")
    args = parser.parse_args()
    names = [args.log.name] if args.log else args.fixtures or DEFAULT
    from playwright.sync_api import sync_playwright

    from kernelscope.server import create_app

    with tempfile.TemporaryDirectory() as tmp:
        config = {"DATABASE": str(Path(tmp) / "traces.sqlite3"), "WARM_POOL": 0,
                  "WARM_UP": False, "KERNEL_CACHE": "", "SPOOL_DIR": tmp}
        if args.webui:
            config["WEBUI_DIR"] = str(args.webui.resolve())
        app = create_app(config)
        ids = {args.log.name: store_log(app, args.log)} if args.log else \
            store_fixtures(app, names)
        server = Server(app)
        results: dict[str, Any] = {}
        try:
            with sync_playwright() as p:
                sys.path.insert(0, str(REPO / "tests"))
                from conftest import CHROMIUM_ARGS

                browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                for name in names:
                    url = f"{server.url}/t/{ids[name]}"
                    size = len(app.test_client().get(f"/api/traces/{ids[name]}").data)
                    runs = [measure(browser, url) for _ in range(args.runs)]
                    results[name] = {"bytes": size, "runs": runs}
                    print("\n".join(report(name, size, runs)), "\n", flush=True)
                    for r in runs:
                        if r["errors"]:
                            print(f"page errors: {r['errors']}", flush=True)
                browser.close()
        finally:
            server.close()
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"{stamp} · host {os.uname().nodename} · {os.cpu_count()} cores · "
          f"load {os.getloadavg()[0]:.1f}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
