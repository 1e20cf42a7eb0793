"""How fast the VS Code panel opens a stored model trace: code-server driven headless.

    PYTHONPATH=$PWD python scripts/panel_timing.py --vsix extension/kernelscope-0.1.0.vsix \
        [--code-server ENTRY.js] [--runs 3] [--fixture NAME ...]

The real app (no workers) holds the fixture traces (as scripts/page_timing.py stores them);
code-server, with the .vsix installed in a fresh profile and `kernelscope.serverUrl` set to
that app, opens each trace's permalink through "Kernelscope: Open Permalink". Measured from
the outside, by Playwright's clock (polling every 20 ms, so each figure carries up to that
much more):

- `open`: Enter in the permalink box to the panel's code pane filled (the host reads the
  trace, one over 1 MiB as its head and first graph, and posts them to the webview);
- each tab's first show: its click to its pane filled;
- the longest main-thread task in the panel's webview during the visit (a buffered
  PerformanceObserver for `longtask` in its frame; the first visit's includes the panel's
  own start).

Each figure is the median over `--runs` opens (the same panel, a new trace each time; a
fresh trace resets every pane). A benchmark: it prints numbers and asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from code_server_smoke import REPO, free_port, panel_frame, profile, stop_group
from page_timing import Server, store_fixtures
from playwright.sync_api import Frame, Page, sync_playwright

ENTRY = (Path.home() / ".cache" / "kernelscope" / "code-server-4.100.0" / "node_modules"
         / "code-server" / "out" / "node" / "entry.js")
TABS = ["graph", "ir", "modules", "fusion", "memory", "timings", "guards"]
OPEN = "Kernelscope: Open Permalink"
# Every long task the panel's frame has had so far (a buffered observer).
LONG = """() => new Promise((done) => {
  const seen = [];
  new PerformanceObserver((list) => { for (const e of list.getEntries()) seen.push(e.duration); })
    .observe({ type: "longtask", buffered: true });
  setTimeout(() => done(seen), 100);
})"""


def wait_filled(frame: Frame, pane: str, timeout_s: float = 120) -> float:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if frame.locator(f"[data-pane={pane}][data-filled=true]").count():
            return time.monotonic()
        time.sleep(0.02)
    raise TimeoutError(f"pane {pane} did not fill")


def open_permalink(page: Page, link: str) -> float:
    # The palette lists the commands the workbench knows when it opens: the extension host
    # may register the extension later, so it is opened again until it does.
    row = page.locator(".quick-input-list .monaco-list-row", has_text=OPEN)
    deadline = time.monotonic() + 180
    while True:
        page.keyboard.press("Control+Shift+P")
        page.wait_for_selector(".quick-input-widget .quick-input-box input", timeout=30_000)
        page.keyboard.type(OPEN)
        try:
            row.first.wait_for(timeout=5_000)
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            page.keyboard.press("Escape")
            time.sleep(2)
    page.keyboard.press("Enter")
    page.wait_for_selector(".quick-input-widget .quick-input-box input", timeout=30_000)
    page.keyboard.type(link)
    t0 = time.monotonic()
    page.keyboard.press("Enter")
    return t0


def visit(page: Page, link: str, frame: Frame | None) -> tuple[dict[str, Any], Frame]:
    before = 0
    if frame is not None:  # the panel shows the last trace until this one comes
        frame.evaluate("window.__last = window.kernelscope.state.trace")
        before = len(frame.evaluate(LONG))
    t0 = open_permalink(page, link)
    frame = frame or panel_frame(page, 120)
    deadline = time.monotonic() + 300  # the host reads a big trace whole: minutes when loaded
    while frame.evaluate("window.kernelscope.state.trace === window.__last"):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the panel never showed {link}")
        time.sleep(0.02)
    filled = wait_filled(frame, "code", 300)
    row: dict[str, Any] = {"open": 1000 * (filled - t0), "tabs": {}}
    for tab in TABS:
        if not frame.locator(f"button.tab[data-tab={tab}]").count():
            continue
        t1 = time.monotonic()
        frame.click(f"button.tab[data-tab={tab}]")
        row["tabs"][tab] = 1000 * (wait_filled(frame, tab, 60) - t1)
    row["longest"] = max([0, *frame.evaluate(LONG)[before:]])
    # Where the graph was laid out: "worker", or "main" when the panel's worker failed.
    row["layout"] = frame.evaluate("document.body.dataset.layout ?? null")
    return row, frame


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--code-server", default=str(ENTRY))
    ap.add_argument("--vsix", required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--fixture", action="append", dest="fixtures")
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    args = ap.parse_args()
    names = args.fixtures or ["llama6_train", "gpt2_train"]
    from kernelscope.server import create_app

    root = Path(tempfile.mkdtemp(prefix="kernelscope-panel-timing-"))
    app = create_app({"DATABASE": str(root / "traces.sqlite3"), "WARM_POOL": 0,
                      "WARM_UP": False, "KERNEL_CACHE": "", "SPOOL_DIR": str(root)})
    # The same trace opened twice is one id: each run stores its own copy (a changed code).
    ids = {(name, i): store_fixtures(app, [name], tag=f"# copy {i}\n")[name]
           for name in names for i in range(args.runs)}
    server = Server(app)
    user, exts, _ = profile(root)
    settings_file = user / "User" / "settings.json"
    settings = json.loads(settings_file.read_text())
    settings.update({"kernelscope.serverUrl": server.url, "kernelscope.startServer": False})
    settings_file.write_text(json.dumps(settings, indent=2))
    ws = root / "workspace"
    config = root / "config.yaml"
    config.write_text("auth: none\n")
    base = ["node", args.code_server, "--config", str(config), "--user-data-dir", str(user),
            "--extensions-dir", str(exts)]
    env = dict(os.environ)
    subprocess.run(base + ["--install-extension", args.vsix], check=True, env=env,
                   stdout=subprocess.DEVNULL, timeout=300)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = open(root / "code-server.log", "wb")
    proc = subprocess.Popen(base + ["--auth", "none", "--bind-addr", f"127.0.0.1:{port}",
                                    "--disable-telemetry", "--disable-update-check",
                                    "--disable-workspace-trust", str(ws)],
                            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    try:
        for _ in range(240):
            try:
                urllib.request.urlopen(f"{url}/healthz", timeout=2).read()
                break
            except OSError:
                time.sleep(0.5)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=args.chromium, headless=True,
                                        args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page(viewport={"width": 1600, "height": 950})
            page.goto(f"{url}/?folder={ws}", timeout=180_000)
            page.wait_for_selector(".monaco-workbench", timeout=180_000)
            frame = None
            for i in range(args.runs):
                for name in names:
                    row, frame = visit(page, f"{server.url}/t/{ids[(name, i)]}", frame)
                    results[name].append(row)
                    print(name, json.dumps(row), flush=True)
            browser.close()
    finally:
        stop_group(proc.pid, timeout=3)
        log.close()
        server.close()
    for name, runs in results.items():
        med = lambda xs: f"{statistics.median(xs):6.0f} ({max(xs):.0f})"  # noqa: E731
        print(f"## {name} in the VS Code panel ({len(runs)} runs; median ms (max))")
        print(f"{'open (code pane filled)':28} {med([r['open'] for r in runs])}")
        for tab in runs[0]["tabs"]:
            print(f"{'first show: ' + tab:28} {med([r['tabs'][tab] for r in runs])}")
        print(f"{'longest task, whole visit':28} {med([r['longest'] for r in runs])}")
        print(f"{'graph laid out in':28} {sorted({str(r['layout']) for r in runs})}\n")
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"{stamp} · host {os.uname().nodename} · {os.cpu_count()} cores · "
          f"load {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO / "tests"))
    sys.exit(main())
