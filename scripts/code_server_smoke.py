"""The extension inside a real VS Code: code-server driven headless by Playwright.

A fresh code-server profile (user data and extensions in a temporary directory) gets the
.vsix; a workspace holds samples/softmax.py. In Chromium the script opens the file, selects
softmax() (lines 10-11), runs "Kernelscope: Compile Selection" from the command palette and
checks, failing loudly on the first that does not hold:

1. the command is in the palette;
2. the Kernelscope panel (a webview: nested iframes) opens and its panes fill from the
   server's stream: code, graph, ir, fusion, memory, timings, guards;
3. the server the extension started is this tree's: its PYTHONPATH starts with this
   checkout and `kernelscope.server` imports from it there;
4. the editor's lines got the extension's decorations (a whole-line background with the
   3 px left border of src/decorations.ts), only on lines of the selected function;
5. a hover on a decorated line is the extension's ("Kernelscope · line N") and names a
   kernel that the panel's code pane shows.

Screenshots and summary.json go to --out (default artifacts/code-server/). Normally run
through `bash scripts/code-server.sh`, which installs code-server and builds the .vsix.

    python scripts/code_server_smoke.py --code-server ENTRY.js --vsix kernelscope-0.1.0.vsix
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from playwright.sync_api import Frame, Page, sync_playwright

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "samples" / "softmax.py"
FUNCTION_LINES = {10, 11}  # def softmax(x): / return torch.softmax(x, dim=-1)
PANES = ["code", "graph", "ir", "fusion", "memory", "timings", "guards"]
COMMAND = "Kernelscope: Compile Selection"


class SmokeFailure(Exception):
    pass


def check(ok: object, message: str) -> None:
    if not ok:
        raise SmokeFailure(message)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def profile(root: Path) -> tuple[Path, Path, Path]:
    """User data (with settings), extensions and a workspace holding the sample."""
    user, exts, ws = root / "user", root / "extensions", root / "workspace"
    (user / "User").mkdir(parents=True)
    exts.mkdir()
    ws.mkdir()
    shutil.copy(SAMPLE, ws / SAMPLE.name)
    settings = {
        "kernelscope.serverUrl": "",  # never attach to a server someone else runs
        "kernelscope.pythonPath": sys.executable,
        "kernelscope.startServer": True,
        "kernelscope.startTimeoutSeconds": 240,
        "kernelscope.device": "cpu",
        "workbench.startupEditor": "none",
        "workbench.tips.enabled": False,
        "security.workspace.trust.enabled": False,
        "extensions.autoUpdate": False,
        "extensions.autoCheckUpdates": False,
        "update.mode": "none",
        "telemetry.telemetryLevel": "off",
        "editor.hover.delay": 300,
    }
    (user / "User" / "settings.json").write_text(json.dumps(settings, indent=2))
    return user, exts, ws


def descendants(root: int) -> list[int]:
    """Processes under `root` (by /proc's parent links)."""
    parent: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
                parent[int(d.name)] = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parent.items() if pp == p]
        out += kids
        todo += kids
    return out


def started_server(code_server: int) -> dict[str, Any] | None:
    """The `python -P -m kernelscope.server` the extension started, with where it imports from."""
    for pid in descendants(code_server):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"kernelscope.server" not in argv or b"-m" not in argv:
            continue
        env = dict(e.decode().split("=", 1) for e in raw if b"=" in e)
        cwd = os.readlink(f"/proc/{pid}/cwd")
        where = subprocess.run(
            [argv[0].decode(), "-P", "-c",
             "import os, kernelscope.server as s; print(os.path.realpath(s.__file__))"],
            cwd=cwd, env=env, capture_output=True, text=True, timeout=120).stdout.strip()
        return {"pid": pid, "pgid": os.getpgid(pid), "argv": [a.decode() for a in argv if a],
                "cwd": cwd, "pythonpath": env.get("PYTHONPATH", ""), "imports_from": where}
    return None


def panel_frame(page: Page, timeout: float) -> Frame:
    """The webview frame that holds the panel's panes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for frame in page.frames:
            try:
                if frame.locator("[data-pane=code]").count():
                    return frame
            except Exception:  # a frame navigating away while we look
                continue
        time.sleep(1)
    raise SmokeFailure(f"no Kernelscope panel (webview with [data-pane=code]) in {timeout:.0f} s")


DECORATED_LINES_JS = """() => {
  // Each decorated line's overlay holds a div with the decoration type's class; the
  // extension's line colour is a whole-line background with a 3 px left border.
  const editor = [...document.querySelectorAll('.monaco-editor')]
    .find((e) => e.querySelector('.view-lines') && e.getBoundingClientRect().width > 0);
  if (!editor) return {lines: [], classes: []};
  const numbers = [...editor.querySelectorAll('.margin-view-overlays .line-numbers')]
    .map((n) => [n.getBoundingClientRect().top, Number(n.textContent.trim())]);
  const lines = new Set(), classes = new Set();
  for (const div of editor.querySelectorAll('.view-overlays > div > div')) {
    const s = getComputedStyle(div);
    if (s.borderLeftWidth !== '3px' || s.borderLeftStyle !== 'solid') continue;
    const top = div.getBoundingClientRect().top;
    const hit = numbers.find(([t]) => Math.abs(t - top) < 2);
    if (hit) lines.add(hit[1]);
    classes.add(div.className + ' ' + s.backgroundColor);
  }
  return {lines: [...lines].sort((a, b) => a - b), classes: [...classes]};
}"""


def drive(page: Page, ws: Path, url: str, shots: Path, summary: dict[str, Any],
          code_server: subprocess.Popen[bytes]) -> None:
    t0 = time.monotonic()

    def mark(step: str) -> None:
        summary["seconds"][step] = round(time.monotonic() - t0, 1)
        n = len(list(shots.glob("*.png"))) + 1
        page.screenshot(path=str(shots / f"{n:02d}-{step}.png"))

    page.goto(f"{url}/?folder={ws}", timeout=180_000)
    page.wait_for_selector(".monaco-workbench", timeout=180_000)
    page.get_by_role("treeitem", name=SAMPLE.name).first.click(timeout=120_000)
    line10 = page.locator(".monaco-editor .view-line", has_text="def softmax(x):")
    line10.wait_for(timeout=60_000)
    before = page.evaluate(DECORATED_LINES_JS)
    # The probe's control: nothing is decorated before the compile.
    check(not before["lines"], f"lines decorated before any compile: {before}")
    mark("workbench")

    # Select the function (both lines), then the command from the palette.
    line10.click()
    page.keyboard.press("Home")
    page.keyboard.press("Shift+ArrowDown")
    page.keyboard.press("Shift+End")
    # The palette lists the commands the workbench knows when it opens: on a loaded host
    # the extension host may register the extension later, so reopen it until it does.
    row = page.locator(".quick-input-list .monaco-list-row", has_text=COMMAND)
    deadline = time.monotonic() + 120
    while True:
        page.keyboard.press("Control+Shift+P")
        page.wait_for_selector(".quick-input-widget .quick-input-box input", timeout=30_000)
        page.keyboard.type(COMMAND)
        try:
            row.first.wait_for(timeout=5_000)
            break
        except Exception:
            check(time.monotonic() < deadline, f"{COMMAND!r} is not in the command palette")
            page.keyboard.press("Escape")
            time.sleep(2)
    mark("palette")
    page.keyboard.press("Enter")

    frame = panel_frame(page, 120)
    summary["panel_frame"] = frame.url.split("?")[0]
    # The first compile: server start, worker, C++ build, profiling. A tab's pane renders
    # when the tab is first shown, so each is shown in turn once the code pane has filled,
    # and the tab showing before is shown again.
    active = None
    for pane in PANES:
        try:
            if pane != "code":
                active = active or frame.evaluate(
                    "document.querySelector('#tabs .tab.active')?.dataset.tab ?? null")
                frame.click(f"button.tab[data-tab={pane}]")
            frame.wait_for_selector(f"[data-pane={pane}][data-filled=true]", state="attached",
                                    timeout=360_000)
        except Exception as e:
            raise SmokeFailure(f"pane {pane} did not fill: {e}") from e
    if active:
        frame.click(f"button.tab[data-tab={active}]")
    check(frame.locator(".error-banner:visible").count() == 0,
          f"the panel shows an error: {frame.locator('.error-banner').all_inner_texts()}")
    kernels = frame.eval_on_selector_all("[data-pane=code] section[data-kernel]",
                                         "els => els.map((e) => e.dataset.kernel)")
    check(kernels, "the code pane lists no kernel")
    summary["kernels"] = kernels
    mark("panel")

    server = started_server(code_server.pid)
    check(server, "no `python -P -m kernelscope.server` under code-server")
    summary["server"] = server
    assert server is not None
    check(server["pythonpath"].split(":")[0] == str(REPO),
          f"the started server's PYTHONPATH is {server['pythonpath']!r}, not this tree")
    check(server["imports_from"].startswith(str(REPO) + "/"),
          f"the started server imports kernelscope.server from {server['imports_from']!r}")
    check("-P" in server["argv"], f"the server was not started with -P: {server['argv']}")

    deadline = time.monotonic() + 60
    while True:
        deco = page.evaluate(DECORATED_LINES_JS)
        if deco["lines"] or time.monotonic() > deadline:
            break
        time.sleep(1)
    summary["decorated_lines"], summary["decoration_classes"] = deco["lines"], deco["classes"]
    check(deco["lines"], "no editor line has the extension's decoration")
    check(set(deco["lines"]) <= FUNCTION_LINES,
          f"decorated lines {deco['lines']} are not all lines of softmax() {FUNCTION_LINES}")
    page.keyboard.press("Escape")
    mark("decorations")

    hovers: dict[int, str] = {}
    for line in deco["lines"]:
        text = page.locator(".monaco-editor .view-line").nth(line - 1).locator("span span").last
        page.mouse.move(0, 0)
        text.hover()
        hover = page.locator(".monaco-hover:visible", has_text="Kernelscope")
        try:
            hover.first.wait_for(timeout=15_000)
        except Exception:
            continue
        hovers[line] = hover.first.inner_text()
        if any(k in hovers[line] for k in kernels):
            mark("hover")
            break
    summary["hovers"] = hovers
    check(hovers, f"no Kernelscope hover on the decorated lines {deco['lines']}")
    named = {line: [k for k in kernels if k in t] for line, t in hovers.items()}
    check(any(named.values()), f"no hover names a kernel of the panel {kernels}: {hovers}")
    line = next(n for n, ks in named.items() if ks)
    check(f"line {line}" in hovers[line], f"the hover does not name line {line}")
    summary["hover_line"], summary["hover_kernels"] = line, named[line]


def extension_log(user: Path) -> str:
    logs = sorted(user.glob("logs/**/*Kernelscope*.log"))
    return "\n".join(f"--- {p}\n{p.read_text()[-4000:]}" for p in logs)


def stop_group(pgid: int, timeout: float = 10) -> None:
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--code-server", required=True, help="code-server's out/node/entry.js")
    ap.add_argument("--vsix", required=True)
    ap.add_argument("--out", default=str(REPO / "artifacts" / "code-server"))
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    args = ap.parse_args()
    shots = Path(args.out)
    shutil.rmtree(shots, ignore_errors=True)
    shots.mkdir(parents=True)
    summary: dict[str, Any] = {"ok": False, "seconds": {}}
    root = Path(tempfile.mkdtemp(prefix="kernelscope-code-server-"))
    user, exts, ws = profile(root)
    config = root / "config.yaml"
    config.write_text("auth: none\n")
    base = ["node", args.code_server, "--config", str(config), "--user-data-dir", str(user),
            "--extensions-dir", str(exts)]
    rest = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(REPO)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), *rest]))
    t0 = time.monotonic()
    subprocess.run(base + ["--install-extension", args.vsix], check=True, env=env,
                   stdout=subprocess.DEVNULL, timeout=300)
    summary["seconds"]["install_vsix"] = round(time.monotonic() - t0, 1)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = open(root / "code-server.log", "wb")
    proc = subprocess.Popen(base + ["--auth", "none", "--bind-addr", f"127.0.0.1:{port}",
                                    "--disable-telemetry", "--disable-update-check",
                                    "--disable-workspace-trust", str(ws)],
                            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    server_pgid = None
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"{url}/healthz", timeout=2).read()
                break
            except OSError:
                check(proc.poll() is None and time.monotonic() < deadline,
                      f"code-server did not answer {url}/healthz")
                time.sleep(0.5)
        summary["seconds"]["code_server_up"] = round(time.monotonic() - t0, 1)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=args.chromium, headless=True,
                                        args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page(viewport={"width": 1440, "height": 900})
            try:
                drive(page, ws, url, shots, summary, proc)
                summary["ok"] = True
            except Exception as e:  # SmokeFailure or a Playwright timeout: report, then fail
                summary["error"] = f"{type(e).__name__}: {e}"
                page.screenshot(path=str(shots / "failure.png"))
            finally:
                server_pgid = (summary.get("server") or {}).get("pgid")
                if server_pgid is None:
                    found = started_server(proc.pid)
                    server_pgid = found and found["pgid"]
                browser.close()
    finally:
        t1 = time.monotonic()
        stop_group(proc.pid, timeout=3)  # code-server keeps running on SIGTERM; nothing to save
        if server_pgid:
            stop_group(server_pgid)
        log.close()
        summary["seconds"]["teardown"] = round(time.monotonic() - t1, 1)
    summary["seconds"]["total"] = round(time.monotonic() - t0, 1)
    (shots / "summary.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary, indent=2))
    if not summary["ok"]:
        print(f"code_server_smoke: FAILED: {summary['error']}", file=sys.stderr)
        print(extension_log(user) or "(no Kernelscope output log)", file=sys.stderr)
        print((root / "code-server.log").read_text()[-3000:], file=sys.stderr)
        return 1
    shutil.rmtree(root, ignore_errors=True)
    print(f"code_server_smoke: ok in {summary['seconds']['total']} s; screenshots in {shots}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
