/** The extension against the vscode stub: commands, Compile Selection end to end against a
 * fake server streaming a recorded trace, the panel's message protocol, decorations and
 * hovers, read-only kernel documents, the status bar and cancel. */

import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import * as vscode from "vscode";
import { stub, Position, Selection, Hover, TextEditor, WebviewPanel } from "./vscode-stub";
import { parsePermalink } from "../src/extension";
import { KernelscopePanel } from "../src/panel";
import { isWebviewToHost, isHostToWebview } from "../src/protocol";
import { EXT, FIXTURE, recorded, until } from "./helpers";
import { harness } from "./harness";

const h = harness();
const { start, panel, statusText } = h;
const posted = (type: string) => h.posted(type);

/** Compile Selection with the cursor on line 6 of the recorded snippet; the panel is ready.
 * Returns the running command (it ends with the job), wrapped so awaiting this does not wait for it. */
async function compileLineSix(): Promise<{ running: Thenable<unknown> }> {
  const editor = stub.openEditor("/work/block.py", recorded().code);
  editor.selection = new Selection(new Position(5, 0), new Position(5, 0));
  const running = vscode.commands.executeCommand("kernelscope.compileSelection");
  await until(() => stub.panels.length > 0);
  panel().webview.send({ type: "ready", restored: false });
  return { running };
}

/** Opens the recorded trace's file, selects `lines`, runs Compile Selection, and lets the
 * panel's script say it is ready. */
async function compileSelection(from: number, to: number): Promise<TextEditor> {
  const editor = stub.openEditor("/work/block.py", recorded().code);
  editor.selection = new Selection(new Position(from - 1, 0), new Position(to - 1, 4));
  const running = vscode.commands.executeCommand("kernelscope.compileSelection");
  await until(() => stub.panels.length > 0, 5000, "the panel");
  panel().webview.send({ type: "ready", restored: false });
  await running;
  return editor;
}

test("every command in package.json is registered, and only those", () => {
  const manifest = JSON.parse(readFileSync(path.join(EXT, "package.json"), "utf8"));
  const declared = manifest.contributes.commands.map((c: { command: string }) => c.command).sort();
  assert.deepEqual([...stub.commands.keys()].sort(), declared);
  const menu = manifest.contributes.menus["editor/context"].map((m: { command: string }) => m.command);
  assert.ok(menu.includes("kernelscope.compileSelection"));
  assert.ok(stub.serializers.has("kernelscope.panel"), "a serializer restores the panel");
  assert.ok(stub.providers.has("kernelscope"), "kernelscope: documents");
  assert.equal(manifest.activationEvents.includes("onWebviewPanel:kernelscope.panel"), true);
});

test("Compile Selection sends the whole file with the selected function as the entry", async () => {
  await start();
  // The recorded file compiles `block` itself (torch.compile(block)(x, w)): no questions.
  await compileSelection(5, 9);
  const compile = h.srv.requests.find((r) => r.url === "/api/compile")!;
  const body = compile.body as { code: string; entry?: string; options: Record<string, unknown> };
  assert.ok(body.code.startsWith(recorded().code));
  assert.equal(body.entry, undefined, "the file's own torch.compile call picks block and its inputs");
  assert.deepEqual(body.options, { device: "cpu", backend: "auto" });
  assert.deepEqual(stub.inputPrompts, []);

  // The panel got a reset and every event, in order.
  const events = posted("event") as unknown as { event: { stage: string } }[];
  assert.deepEqual(events.map((m) => m.event.stage), recorded().events.map((e) => e.stage));
  assert.equal((posted("reset")[0] as unknown as { title: { region: string } }).title.region, "function block");
  assert.match(statusText(), /\$\(check\) Kernelscope: 4 kernels · 0\.187 ms/);
  assert.equal(h.session.history(stub.editors[0].document.uri as never).at(-1), "TRACE1");
});

test("a function without inputs in the file asks for each parameter, and remembers", async () => {
  await start();
  const file = "import torch\n\n\ndef f(x, w, alpha=0.5):\n    return (x @ w).relu() * alpha\n";
  const editor = stub.openEditor("/work/f.py", file);
  editor.selection = new Selection(new Position(4, 4), new Position(4, 4));
  stub.inputAnswers = ["float32[8, 16]", "float16[16, 4]"];
  const first = vscode.commands.executeCommand("kernelscope.compileSelection");
  await until(() => stub.panels.length > 0);
  panel().webview.send({ type: "ready", restored: false });
  await first;
  assert.deepEqual(stub.inputPrompts.map((p) => p.value), ["float32[64, 1024]", "float32[64, 1024]"]);
  assert.match(stub.inputPrompts[0].prompt ?? "", /^x: dtype\[shape\]/);
  const body = h.srv.requests.find((r) => r.url === "/api/compile")!.body as { code: string; entry: string };
  assert.equal(body.entry, "f");
  assert.match(body.code, /example_inputs = \(__kernelscope_torch\.randn\(\(8, 16\), dtype=__kernelscope_torch\.float32\), __kernelscope_torch\.randn\(\(16, 4\), dtype=__kernelscope_torch\.float16\)\)/);

  // The second time, the answers given are offered.
  stub.inputPrompts = [];
  await vscode.commands.executeCommand("kernelscope.compileSelection");
  assert.deepEqual(stub.inputPrompts.map((p) => p.value), ["float32[8, 16]", "float16[16, 4]"]);

  // Escape cancels the compile.
  const before = h.srv.requests.length;
  stub.inputAnswers = [undefined];
  await vscode.commands.executeCommand("kernelscope.compileSelection");
  assert.equal(h.srv.requests.filter((r) => r.url === "/api/compile").length, h.srv.requests.slice(0, before).filter((r) => r.url === "/api/compile").length);
});

test("source lines that produced kernels are decorated; the hover lists kernels, time and % of peak", async () => {
  await start();
  const editor = await compileSelection(5, 9);
  const lineTypes = stub.decorationTypes.filter((t) => t.options.borderWidth === "0 0 0 3px");
  assert.deepEqual(editor.decoratedLines(lineTypes), [6, 7, 8, 9]);
  // Line 8 went into two kernels (the softmax reduction and the fused epilogue).
  const hover = stub.hoverProviders[0].provideHover(editor.document, new Position(7, 0)) as Hover;
  const md = hover.contents.value;
  assert.match(md, /cpp_red_fused__softmax_2.*\| 31\.0 µs \| 10\.0 % \|/);
  assert.match(md, /cpp_poi_fused__softmax_add_mul_3.*\| 44\.0 µs \| 14\.0 % \|/);
  assert.match(md, /command:kernelscope\.showLines\?/);
  assert.deepEqual((hover.contents.isTrusted as { enabledCommands: string[] }).enabledCommands.sort(), ["kernelscope.openKernel", "kernelscope.showLines"]);
  assert.equal(stub.hoverProviders[0].provideHover(editor.document, new Position(0, 0)), null, "line 1 made nothing");
  const other = stub.openEditor("/work/other.py", recorded().code);
  assert.equal(stub.hoverProviders[0].provideHover(other.document, new Position(7, 0)), null, "only the compiled file");
});

test("panel messages: a kernel click reveals its lines, hovers mark lines, the cursor selects in the panel", async () => {
  await start();
  const editor = await compileSelection(5, 9);
  panel().webview.send({ type: "reveal", lines: [8, 9] });
  await until(() => editor.revealed.length > 0);
  assert.deepEqual([editor.selection.start.line, editor.selection.end.line], [7, 8]);
  panel().webview.send({ type: "hover", lines: [7] });
  const selected = stub.decorationTypes.find((t) => t.options.overviewRulerColor === "rgba(255, 209, 102, 0.9)")!;
  assert.deepEqual(editor.decoratedLines([selected]), [7]);
  // The selection the reveal made is not echoed back; the user's next cursor move is.
  stub.selectionEmitter.fire({ textEditor: editor, selections: [editor.selection] });
  assert.equal(posted("selectLines").length, 0);
  stub.selectionEmitter.fire({ textEditor: editor, selections: [new Selection(new Position(6, 2), new Position(6, 2))] });
  assert.deepEqual(posted("selectLines"), [{ type: "selectLines", lines: [7], pin: true }]);
  // Highlight requests go to the server; junk from the webview is ignored.
  panel().webview.send({ type: "highlight", id: 3, code: "x = 1", language: "python" });
  await until(() => posted("highlighted").length > 0);
  assert.ok(h.srv.requests.some((r) => r.url === "/api/highlight"));
  for (const junk of [null, "ready", { type: "reveal", lines: ["1"] }, { type: "openKernel", gid: "0" }, { type: "eval", code: "x" }]) {
    assert.equal(isWebviewToHost(junk), false);
    panel().webview.send(junk);
  }
  assert.equal(isHostToWebview({ type: "event", event: { stage: "source" } }), true);
});

test("generated code opens as read-only kernelscope: documents with the right language", async () => {
  await start();
  await compileSelection(5, 9);
  panel().webview.send({ type: "openKernel", gid: 0, kernel: "cpp_red_fused__softmax_2" });
  await until(() => stub.shown.length > 0);
  const doc = stub.shown[0].document;
  assert.equal(doc.uri.scheme, "kernelscope");
  assert.match(doc.uri.path, /\/0\/cpp_red_fused__softmax_2\.cpp$/);
  assert.equal(doc.languageId, "cpp");
  const codegen = recorded().events.find((e) => e.stage === "codegen")!.data as { graphs: { kernels: { name: string; source: string }[]; wrapper: { source: string } }[] };
  assert.equal(doc.getText(), codegen.graphs[0].kernels.find((k) => k.name === "cpp_red_fused__softmax_2")!.source);
  // The wrapper, from the command palette's quick pick.
  stub.quickPickAnswers = [h.session.result!.generated().findIndex((c) => c.name === "wrapper")];
  await vscode.commands.executeCommand("kernelscope.openKernel");
  const wrapper = stub.shown[1].document;
  assert.equal(wrapper.languageId, "python");
  assert.equal(wrapper.getText(), codegen.graphs[0].wrapper.source);
  // A document is provided text only: there is no way to write it back.
  const provider = stub.providers.get("kernelscope") as unknown as Record<string, unknown>;
  assert.equal(typeof provider.provideTextDocumentContent, "function");
  assert.equal(provider.writeFile, undefined);
});

test("the panel's HTML: nonce CSP, the extension's own files only, no retained context", async () => {
  await start();
  await compileSelection(5, 9);
  const p = panel();
  const html = p.webview.html;
  const csp = /content="([^"]+)"/.exec(html)![1].replace(/&#39;|&quot;/g, "'");
  assert.match(csp, /^default-src 'none'; script-src 'nonce-([A-Za-z0-9]+)'; style-src https:\/\/stub\.vscode-cdn\.net 'unsafe-inline'/);
  const nonce = /'nonce-([A-Za-z0-9]+)'/.exec(csp)![1];
  assert.match(html, new RegExp(`<script type="module" nonce="${nonce}" src="https://stub.vscode-cdn.net${EXT}/dist/webview.js">`));
  assert.equal(p.options.retainContextWhenHidden, undefined);
  assert.deepEqual((p.options.localResourceRoots as vscode.Uri[]).map((u) => u.path), [`${EXT}/dist`]);
  // The serializer revives a restored panel into the same class.
  p.dispose();
  const restored = new WebviewPanel("kernelscope.panel", "Kernelscope", {});
  await stub.serializers.get("kernelscope.panel")!.deserializeWebviewPanel(restored as never, {});
  assert.equal(KernelscopePanel.current?.panel, restored);
  assert.match(restored.webview.html, /Content-Security-Policy/);
});

test("the status bar shows the stage and cancels the job", async () => {
  await start({ hang: true });
  const { running } = await compileLineSix();
  await until(() => /Kernelscope: scheduling/.test(statusText()), 5000, "the stage in the status bar");
  assert.equal(stub.statusItems[0].command, "kernelscope.cancel");
  await vscode.commands.executeCommand("kernelscope.cancel");
  await running;
  assert.ok(h.srv.requests.some((r) => r.method === "POST" && r.url === "/api/jobs/j1/cancel"));
  // The server ended the stream: its `cancelled` error is in the panel, the partial trace kept.
  assert.match(statusText(), /\$\(error\) Kernelscope: cancelled: cancelled by the client/);
  const stages = (posted("event") as unknown as { event: { stage: string; data: { kind?: string } } }[]).map((m) => m.event);
  assert.deepEqual(stages.slice(-2).map((e) => e.stage), ["error", "done"]);
  assert.equal(h.session.result?.traceId, "PARTIAL1");
});

test("the status bar names the stages as the server publishes them (GET /api/schema)", async () => {
  // A server whose contract has a stage this build of the extension does not know.
  const stages = ["source", "capture", "lowering", "autotune", "scheduling", "memory", "codegen", "compile", "run", "profile", "done"];
  await start({ hang: true, stages });
  const { running } = await compileLineSix();
  await until(() => /Kernelscope: autotune/.test(statusText()), 5000, "the server's stage after lowering");
  assert.ok(h.srv.requests.some((r) => r.url === "/api/schema"));
  await vscode.commands.executeCommand("kernelscope.cancel");
  await running;
});

test("a server without a cancel endpoint: the extension stops following the job", async () => {
  await start({ hang: true, cancel: false });
  const { running } = await compileLineSix();
  await until(() => /Kernelscope: scheduling/.test(statusText()), 5000, "the stage in the status bar");
  await vscode.commands.executeCommand("kernelscope.cancel");
  await running;
  assert.match(statusText(), /cancelled/);
  assert.equal((posted("failure").at(-1) as unknown as { kind: string }).kind, "cancelled");
  assert.ok(stub.messages.some((m) => /cannot cancel jobs/.test(m.text)));
});

test("Open Permalink shows a stored trace; Compare With Previous opens the diff view", async () => {
  await start();
  assert.deepEqual(parsePermalink("http://127.0.0.1:8765/t/abc123"), ["http://127.0.0.1:8765", "abc123"]);
  assert.deepEqual(parsePermalink("abc123"), [null, "abc123"]);
  assert.equal(parsePermalink("javascript:alert(1)"), null);
  await vscode.commands.executeCommand("kernelscope.openPermalink", `${h.srv.url}/t/OLD1`);
  assert.ok(h.srv.requests.some((r) => r.url === "/api/traces/OLD1?split=1"));
  const untitled = stub.documents.find((d) => d.uri.scheme === "untitled")!;
  assert.equal(untitled.getText(), recorded().code);
  panel().webview.send({ type: "ready", restored: false });
  assert.equal(posted("trace").length >= 1, true);

  await compileSelection(5, 9);
  const editor = await compileSelection(5, 9);
  const history = h.session.history(editor.document.uri as never);
  assert.equal(history.length, 1, "the same trace twice is one entry");
  await h.context.workspaceState.update("kernelscope.history", { [editor.document.uri.toString()]: ["A1", "TRACE1"] });
  window_activate(editor);
  await vscode.commands.executeCommand("kernelscope.compareWithPrevious");
  // The web UI's Diff pane in the panel, both stored traces fetched; the page is one click away.
  assert.ok(h.srv.requests.some((r) => r.url === "/api/traces/A1") && h.srv.requests.some((r) => r.url === "/api/traces/TRACE1"));
  assert.ok(h.srv.requests.some((r) => r.url === "/api/diff/A1/TRACE1"));
  const diff = posted("diff").at(-1) as unknown as { a: { id: string; href: string; events: unknown[] }; b: { id: string } };
  assert.deepEqual([diff.a.id, diff.b.id, diff.a.href], ["A1", "TRACE1", `${h.srv.url}/t/A1`]);
  assert.equal(diff.a.events.length, recorded().events.length);
  assert.deepEqual(stub.opened, []);
  assert.ok(stub.messages.some((m) => /comparing trace A1 with TRACE1/.test(m.text)));
});

function window_activate(editor: TextEditor): void {
  (vscode.window as { activeTextEditor?: TextEditor }).activeTextEditor = editor;
}

test("after a reload, the restored panel's trace decorates its file again", async () => {
  const editor = stub.openEditor("/work/block.py", recorded().code);
  const restored = new WebviewPanel("kernelscope.panel", "Kernelscope", {});
  await stub.serializers.get("kernelscope.panel")!.deserializeWebviewPanel(restored as never, {});
  const title = { file: "block.py", region: "function block", document: editor.document.uri.toString() };
  restored.webview.send({ type: "ready", restored: true });
  restored.webview.send({ type: "restore", title, events: recorded().events });
  const lineTypes = stub.decorationTypes.filter((t) => t.options.borderWidth === "0 0 0 3px");
  assert.deepEqual(editor.decoratedLines(lineTypes), [6, 7, 8, 9]);
  assert.equal(restored.webview.posted.length, 0, "a restored panel is not sent the trace it has");
  assert.equal(isWebviewToHost({ type: "restore", title, events: [{ stage: 3 }] }), false);
});

test("the error's line, graph breaks and ATen fallbacks become diagnostics on the file", async () => {
  const [source, capture, lowering] = recorded().events;
  await start({ events: [
    source,
    { ...capture, data: { ...capture.data, graph_breaks: [{ reason: "print() is not traceable", line: 7 }] } },
    { ...lowering, data: { graphs: [{ id: 0, buffers: [], inputs: [], outputs: [], fallbacks: [{ op: "aten.sort.default", node: "sort", line: 6 }] }] } },
    { seq: 3, stage: "error", ms: 0, data: { stage: "scheduling", kind: "exception", message: "RuntimeError: boom", line: 8 } },
    { seq: 4, stage: "done", ms: 0, data: { ok: false } },
  ] });
  const editor = await compileSelection(5, 9);
  const diags = stub.diagnostics.get("kernelscope")!.get(editor.document.uri.toString())!;
  const summary = diags.map((d) => [d.range.start.line + 1, d.severity, d.message]).sort();
  assert.deepEqual(summary, [
    [6, 2, "falls back to ATen: aten.sort.default"],
    [7, 1, "graph break: print() is not traceable"],
    [8, 0, "exception in scheduling: RuntimeError: boom"],
  ]);
  assert.match(statusText(), /\$\(error\) Kernelscope: exception: RuntimeError: boom/);
});

test("a restored panel's highlight requests go to the configured server, if it answers", async () => {
  await start();
  const restored = new WebviewPanel("kernelscope.panel", "Kernelscope", {});
  await stub.serializers.get("kernelscope.panel")!.deserializeWebviewPanel(restored as never, {});
  restored.webview.send({ type: "ready", restored: true });
  restored.webview.send({ type: "highlight", id: 1, code: "x = 1", language: "python" });
  await until(() => restored.webview.posted.length > 0);
  assert.deepEqual(restored.webview.posted, [{ type: "highlighted", id: 1, html: "<div class=\"highlight\"><pre></pre></div>" }]);
  const manifest = JSON.parse(readFileSync(path.join(EXT, "package.json"), "utf8"));
  assert.deepEqual(manifest.capabilities.untrustedWorkspaces.restrictedConfigurations.sort(),
    ["kernelscope.pythonPath", "kernelscope.serverUrl", "kernelscope.startServer"]);
});

test("the panel's Cancel button cancels the running job", async () => {
  await start({ hang: true });
  const { running } = await compileLineSix();
  await until(() => h.session.jobId !== null, 5000, "the job");
  panel().webview.send({ type: "cancel" });
  await running;
  assert.ok(h.srv.requests.some((r) => r.method === "POST" && r.url === "/api/jobs/j1/cancel"));
  assert.equal((h.session.result?.trace.error as { kind?: string } | null)?.kind, "cancelled");
});

test("a recorded GPU trace: Triton kernels hover with their time and % of peak and open as Python", async () => {
  const h200 = JSON.parse(readFileSync(path.join(path.dirname(FIXTURE), "h200_softmax.json"), "utf8")) as ReturnType<typeof recorded>;
  await start({ events: h200.events });
  const editor = stub.openEditor("/work/softmax.py", h200.code);
  const running = vscode.commands.executeCommand("kernelscope.compileFile");
  await until(() => stub.panels.length > 0);
  panel().webview.send({ type: "ready", restored: false });
  await running;
  const body = h.srv.requests.find((r) => r.url === "/api/compile")!.body as { code: string; entry?: string };
  assert.equal(body.entry, undefined, "the file's example_inputs and default entry");
  assert.equal(body.code, h200.code);
  const kernel = h.session.result!.kernels()[0];
  const line = kernel.lines[0];
  const hover = stub.hoverProviders[0].provideHover(editor.document, new Position(line - 1, 0)) as Hover;
  // The figures the recorded profile holds for this kernel (re-recording the fixture changes them).
  const profile = h200.events.find((e) => e.stage === "profile")!.data as {
    kernels: { name: string; ms: number; pct_peak: number }[];
  };
  const timed = profile.kernels.find((k) => k.name === kernel.name)!;
  const figures = `| ${(timed.ms * 1000).toFixed(1)} µs | ${timed.pct_peak.toFixed(1)} % |`;
  assert.ok(hover.contents.value.includes(`${kernel.name}\``), hover.contents.value);
  assert.ok(hover.contents.value.includes(figures), `${figures} in ${hover.contents.value}`);
  await vscode.commands.executeCommand("kernelscope.openKernel", h.session.result!.id, kernel.gid, kernel.name);
  const doc = stub.shown.at(-1)!.document;
  assert.match(doc.uri.path, /\.py$/);
  assert.equal(doc.languageId, "python");
  assert.match(doc.getText(), /@triton\.jit/);
});
