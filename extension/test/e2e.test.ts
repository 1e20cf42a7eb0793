/** The whole way, with nothing faked but VS Code: the extension starts the real server of
 * this checkout (`python -m kernelscope.server`), Compile Selection sends a block of a function, the real
 * compiler builds C++ kernels in the sandboxed worker, and the events come back with their
 * lines mapped onto the selected lines of the file. Skipped where no Python has the package. */

import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import * as vscode from "vscode";
import { stub, makeContext, Position, Selection, Hover } from "./vscode-stub";
import { activate, deactivate } from "../src/extension";
import { KernelscopePanel } from "../src/panel";
import { EXT, REPO, until } from "./helpers";

function python(): string | null {
  for (const py of [process.env.PYTHON, "python", "python3"]) {
    if (!py) continue;
    try {
      execFileSync(py, ["-c", "import server, compiler, torch, flask"], { env: { ...process.env, PYTHONPATH: REPO }, stdio: "ignore" });
      return py;
    } catch { /* next */ }
  }
  return null;
}

const FILE = `import torch


def f(x, w):
    h = x @ w
    y = torch.relu(h) * 2.0
    return y.sum(dim=-1)
`;

test("Compile Selection on a block, through the real server and compiler", { skip: python() ? false : "no Python with the kernelscope package", timeout: 240_000 }, async () => {
  stub.reset();
  KernelscopePanel.current = null;
  process.env.PYTHONPATH = REPO;
  process.env.XDG_DATA_HOME = mkdtempSync(path.join(tmpdir(), "ks-ext-e2e-"));
  Object.assign(stub.settings, {
    "kernelscope.serverUrl": "", "kernelscope.pythonPath": python(), "kernelscope.device": "cpu",
    "kernelscope.backend": "cpp", "kernelscope.compileOptions": { fusion: true, inductor: false },
    // A loaded 2-core machine can take over the default 60 s to import torch and start.
    "kernelscope.startTimeoutSeconds": 180,
  });
  const context = makeContext(EXT);
  const session = activate(context as unknown as vscode.ExtensionContext);
  try {
    const editor = stub.openEditor(path.join(REPO, "f.py"), FILE);
    editor.selection = new Selection(new Position(4, 0), new Position(6, 0)); // lines 5-6
    stub.inputAnswers = ["float32[8, 16]", "float32[16, 32]"];
    const running = vscode.commands.executeCommand("kernelscope.compileSelection");
    await until(() => stub.panels.length > 0);
    stub.panels[0].webview.send({ type: "ready", restored: false });
    await running;
    const result = session.result!;
    const stages = result.events.map((e) => e.stage);
    assert.deepEqual(stub.messages.filter((m) => m.level === "error"), []);
    assert.ok(!stages.includes("error"), JSON.stringify(result.trace.error));
    assert.equal(result.ok, true);
    assert.equal(result.trace.data("run")?.ok, true, "the kernels match eager");
    assert.match(result.traceId ?? "", /^[A-Za-z0-9]{12}$/);
    // Every kernel names only the selected lines, and those lines are decorated.
    const lines = new Set(result.kernels().flatMap((k) => k.lines));
    assert.deepEqual([...lines].sort(), [5, 6]);
    const lineTypes = stub.decorationTypes.filter((t) => t.options.borderWidth === "0 0 0 3px");
    assert.deepEqual(editor.decoratedLines(lineTypes), [5, 6]);
    const hover = stub.hoverProviders[0].provideHover(editor.document, new Position(5, 0)) as Hover;
    assert.match(hover.contents.value, /cpp_/);
    assert.equal(result.generated().find((c) => c.name !== "wrapper")?.language, "cpp");
    assert.match(stub.statusItems[0].text, /\$\(check\) Kernelscope: \d+ kernels?/);
    // The panel got every event the server streamed.
    const posted = stub.panels[0].webview.posted as { type: string; event?: { stage: string } }[];
    assert.equal(posted.filter((m) => m.type === "event").length, result.events.length);

    // The diff view Compare With Previous opens is a page of this server.
    const client = await session.currentClient();
    const diff = await fetch(client.diffUrl(result.traceId!, result.traceId!));
    assert.equal(diff.status, 200);
    assert.match(diff.headers.get("content-type") ?? "", /text\/html/);

    // Cancel from the status bar stops a job that would run for a minute: the server ends
    // the stream with an error of kind "cancelled".
    const slow = stub.openEditor(path.join(REPO, "slow.py"), "import time\nimport torch\n\n\ndef g(x):\n    return x.cos()\n\n\ntime.sleep(60)\n");
    slow.selection = new Selection(new Position(5, 4), new Position(5, 4));
    stub.inputAnswers = ["float32[8]"];
    const started = Date.now();
    const slowRun = vscode.commands.executeCommand("kernelscope.compileSelection");
    await until(() => session.jobId !== null, 60_000, "the job to be accepted");
    await vscode.commands.executeCommand("kernelscope.cancel");
    await slowRun;
    const cancelled = session.result!;
    assert.equal((cancelled.trace.error as { kind?: string } | null)?.kind, "cancelled", JSON.stringify(cancelled.events.map((e) => e.stage)));
    assert.equal(cancelled.ok, false);
    assert.ok(Date.now() - started < 55_000, "cancelled before the snippet's sleep ended");
    assert.match(stub.statusItems[0].text, /\$\(error\) Kernelscope: cancelled/);
  } finally {
    const url = session.server.startedUrl;
    const pid = session.server.startedPid;
    deactivate();
    for (const d of context.subscriptions) d.dispose();
    if (url && pid) {
      // Stopped means its whole process group has exited (SIGTERM, SIGKILL after 5 s), and
      // then nothing answers on its port. One failed health check is not enough: a
      // kept-alive connection the server closes fails while a new one is still accepted
      // (a gunicorn worker stops accepting up to a second after SIGTERM).
      const groupAlive = () => { try { process.kill(-pid, 0); return true; } catch { return false; } };
      const end = Date.now() + 15_000;
      while (groupAlive() && Date.now() < end) await new Promise((r) => setTimeout(r, 250));
      assert.ok(!groupAlive(), "the started server's process group exits on deactivate");
      const answered = await fetch(`${url}/api/health`).then(() => true, () => false);
      assert.ok(!answered, "the started server is stopped on deactivate");
    }
  }
});
