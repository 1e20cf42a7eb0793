/**
 * The extension's entry point: registers the commands, the panel serializer, the
 * `kernelscope:` documents, the hover and the editor listeners, and stops a server it
 * started when VS Code deactivates it. The work itself is in session.ts.
 */

import * as vscode from "vscode";
import { KernelscopeClient } from "./client";
import { SCHEME } from "./documents";
import { KernelscopePanel, VIEW_TYPE } from "./panel";
import { ServerManager } from "./server";
import { Session } from "./session";

let session: Session | null = null;

/** "http://host:8765/t/abc123" -> [origin, id]; "abc123" -> [null, id]; else null. */
export function parsePermalink(text: string): [string | null, string] | null {
  const s = text.trim();
  if (/^[A-Za-z0-9_-]{4,64}$/.test(s)) return [null, s];
  try {
    const url = new URL(s);
    const m = /^\/(?:t|api\/traces)\/([A-Za-z0-9_-]+)\/?$/.exec(url.pathname);
    return m && (url.protocol === "http:" || url.protocol === "https:") ? [url.origin, m[1]] : null;
  } catch {
    return null;
  }
}

export function activate(context: vscode.ExtensionContext): Session {
  const log = vscode.window.createOutputChannel("Kernelscope");
  const server = new ServerManager((line) => log.appendLine(line));
  const s = new Session(context, server, log);
  session = s;
  const editorOf = () => {
    const editor = vscode.window.activeTextEditor;
    if (!editor) void vscode.window.showWarningMessage("Kernelscope: open a Python file first.");
    return editor;
  };
  const command = (id: string, fn: (...args: never[]) => unknown) =>
    context.subscriptions.push(vscode.commands.registerCommand(id, fn));

  command("kernelscope.compileSelection", () => { const e = editorOf(); return e && s.compileSelection(e); });
  command("kernelscope.compileFile", () => { const e = editorOf(); return e && s.compileFile(e); });
  command("kernelscope.cancel", () => s.cancel());
  command("kernelscope.showPanel", () => KernelscopePanel.createOrShow(context.extensionUri, false));
  command("kernelscope.openPermalink", async (link?: string) => {
    const text = link ?? await vscode.window.showInputBox({
      title: "Kernelscope: Open Permalink", prompt: "A permalink (http://127.0.0.1:8765/t/<id>) or a trace id",
      ignoreFocusOut: true, validateInput: (v) => (parsePermalink(v) ? null : "not a permalink or trace id"),
    });
    if (!text) return;
    const parsed = parsePermalink(text);
    if (!parsed) return void vscode.window.showErrorMessage(`Kernelscope: not a permalink: ${text}`);
    try {
      const client = parsed[0] ? new KernelscopeClient(parsed[0]) : await s.currentClient();
      await s.openTrace(client, parsed[1]);
    } catch (err) {
      void vscode.window.showErrorMessage(`Kernelscope: ${(err as Error).message}`);
    }
  });
  command("kernelscope.copyPermalink", async () => {
    const id = s.result?.traceId;
    if (!id) return void vscode.window.showInformationMessage("Kernelscope: no finished trace yet.");
    const url = (await s.currentClient()).permalink(id);
    await vscode.env.clipboard.writeText(url);
    void vscode.window.showInformationMessage(`Kernelscope: copied ${url}`);
  });
  command("kernelscope.compareWithPrevious", async () => {
    const editor = vscode.window.activeTextEditor;
    const uri = editor?.document.uri ?? (s.result?.documentUri ? vscode.Uri.parse(s.result.documentUri) : undefined);
    const history = uri ? s.history(uri) : [];
    if (history.length < 2) {
      return void vscode.window.showInformationMessage("Kernelscope: compile this file twice (change something in between) to compare the two traces.");
    }
    const [a, b] = history.slice(-2);
    const client = await s.currentClient();
    try {
      // The explorer's Diff pane in the panel; its page, /diff/<a>/<b>, one click away.
      const [ta, tb, d] = await Promise.all([client.trace(a), client.trace(b), client.diff(a, b)]);
      KernelscopePanel.createOrShow(context.extensionUri).post({ type: "diff",
        a: { id: a, href: client.permalink(a), events: ta.events }, b: { id: b, href: client.permalink(b), events: tb.events },
        groups: d.groups });
      const choice = await vscode.window.showInformationMessage(`Kernelscope: comparing trace ${a} with ${b}.`, "Open in Browser");
      if (choice !== "Open in Browser") return;
    } catch (err) {
      void vscode.window.showWarningMessage(`Kernelscope: ${(err as Error).message}; opening the diff page instead.`);
    }
    // In the browser: the server forbids framing its pages (frame-ancestors 'none'), so
    // VS Code's Simple Browser, an iframe, cannot show it.
    await vscode.env.openExternal(vscode.Uri.parse(client.diffUrl(a, b)));
  });
  command("kernelscope.openKernel", async (resultId?: string, gid?: number, name?: string) => {
    const result = s.result;
    if (!result || (resultId !== undefined && resultId !== result.id)) {
      return void vscode.window.showInformationMessage("Kernelscope: that compile is no longer the current one.");
    }
    if (gid === undefined || name === undefined) {
      const picked = await vscode.window.showQuickPick(result.generated().map((c) => ({
        label: c.name, description: `graph ${c.gid} · ${c.target}`, code: c,
      })), { title: "Kernelscope: open generated code" });
      if (!picked) return;
      ({ gid, name } = picked.code);
    }
    await s.documents.open(result, gid, name);
  });
  command("kernelscope.showLines", (...lines: number[]) => {
    KernelscopePanel.createOrShow(context.extensionUri).post({ type: "selectLines", lines: lines.flat(), pin: true });
  });

  context.subscriptions.push(
    log, s,
    vscode.workspace.registerTextDocumentContentProvider(SCHEME, s.documents),
    vscode.languages.registerHoverProvider([{ language: "python", scheme: "file" }, { language: "python", scheme: "untitled" }], s.decorations),
    vscode.window.registerWebviewPanelSerializer(VIEW_TYPE, {
      async deserializeWebviewPanel(panel: vscode.WebviewPanel) {
        KernelscopePanel.revive(panel, context.extensionUri);
      },
    }),
    vscode.window.onDidChangeVisibleTextEditors((editors) => editors.forEach((e) => s.decorations.apply(e))),
    vscode.window.onDidChangeTextEditorSelection((e) => s.onEditorSelection(e)),
    { dispose: () => server.stop() },
  );
  return s;
}

export function deactivate(): void {
  session?.server.stop();
  session = null;
}
