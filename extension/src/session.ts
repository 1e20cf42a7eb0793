/**
 * One compile from the editor to the panel and back: plan the request from the selection
 * (snippet.ts), ask for missing inputs, attach to or start the server, stream the job's
 * events into the panel, the status bar and the editor's decorations, and remember the
 * trace for permalinks and "Compare With Previous". Also the way back: a click in the panel
 * reveals source lines, the editor's cursor selects in the panel.
 */

import * as vscode from "vscode";
import { ApiError, KernelscopeClient } from "./client";
import { SourceDecorations } from "./decorations";
import { KernelDocuments } from "./documents";
import { watchFollowUps } from "./followups";
import { askInputs } from "./inputs";
import { KernelscopePanel } from "./panel";
import type { HostToWebview, StageEvent, TraceTitle, TracePart, WebviewToHost } from "./protocol";
import { traceEvents } from "./protocol";
import { CompileResult } from "./result";
import { ServerManager, ServerSettings, SetupError, chooseDevice } from "./server";
import { Plan, buildSnippet, planFile, planSelection, remapLines } from "./snippet";
import { JobStatus } from "./statusbar";

const HISTORY = "kernelscope.history";

export interface Settings extends ServerSettings {
  device: string;
  backend: string;
  compileOptions: Record<string, unknown>;
}

export function readSettings(folder: vscode.WorkspaceFolder | undefined): Settings {
  const c = vscode.workspace.getConfiguration("kernelscope");
  const python = c.get<string>("pythonPath") ||
    vscode.workspace.getConfiguration("python").get<string>("defaultInterpreterPath") || "python3";
  return {
    serverUrl: c.get<string>("serverUrl", "http://127.0.0.1:8765"),
    python,
    autoStart: c.get<boolean>("startServer", true),
    cwd: folder?.uri.fsPath,
    device: c.get<string>("device", "auto"),
    backend: c.get<string>("backend", "auto"),
    compileOptions: c.get<Record<string, unknown>>("compileOptions", {}),
    startTimeoutMs: c.get<number>("startTimeoutSeconds", 60) * 1000,
  };
}

interface Running {
  client: KernelscopeClient | null;
  jobId: string | null;
  abort: AbortController;
}

export class Session implements vscode.Disposable {
  readonly decorations = new SourceDecorations();
  readonly documents = new KernelDocuments();
  readonly status = new JobStatus();
  result: CompileResult | null = null;
  private running: Running | null = null;
  private counter = 0;
  private revealing = false;
  private client: KernelscopeClient | null = null;
  /** The watch of the current result's follow-ups (after `done`); a new result stops it. */
  private following: AbortController | null = null;
  /** Settles when that watch ends (for tests). */
  followUps: Promise<void> = Promise.resolve();
  /** How often the server is asked about follow-ups (as the web UI asks). */
  followUpPollMs = 1000;

  constructor(
    private readonly context: vscode.ExtensionContext,
    readonly server: ServerManager,
    private readonly log: vscode.OutputChannel | { appendLine(s: string): void },
  ) {
    KernelscopePanel.onMessage = (m) => this.onPanelMessage(m);
  }

  /** "Kernelscope: Compile Selection": the selected lines (or the cursor's function). */
  compileSelection(editor: vscode.TextEditor): Promise<void> {
    const s = editor.selection;
    const end = s.end.line > s.start.line && s.end.character === 0 ? s.end.line : s.end.line + 1;
    const plan = planSelection(editor.document.getText(), s.start.line + 1, end);
    return this.compile(editor.document, plan);
  }

  /** "Kernelscope: Compile File". */
  compileFile(editor: vscode.TextEditor): Promise<void> {
    return this.compile(editor.document, planFile(editor.document.getText()));
  }

  async compile(document: vscode.TextDocument, plan: Plan): Promise<void> {
    if (this.running) {
      const choice = await vscode.window.showWarningMessage("A Kernelscope compile is running.", "Cancel it and compile", "Keep it");
      if (choice !== "Cancel it and compile") return;
      await this.cancel();
    }
    const text = document.getText();
    let inputs: string[] = [];
    if (plan.needsInputs.length) {
      const key = `${document.uri.toString()}#${plan.key}`;
      const answers = await askInputs(this.context.workspaceState, key, plan.label, plan.needsInputs);
      if (!answers) return;
      inputs = answers;
    }
    const snippet = buildSnippet(text, plan, inputs);
    const folder = vscode.workspace.getWorkspaceFolder(document.uri);
    const settings = readSettings(folder);
    const title: TraceTitle = { file: vscode.workspace.asRelativePath(document.uri), region: plan.label, document: document.uri.toString() };
    const result = new CompileResult(`r${++this.counter}`, document.uri.toString(), title);
    const panel = KernelscopePanel.createOrShow(this.context.extensionUri);
    panel.post({ type: "reset", title });
    this.setResult(result);
    const running: Running = { client: null, jobId: null, abort: new AbortController() };
    this.running = running;
    this.status.running(plan.label, "starting the server");
    try {
      const client = await this.ensureServer(settings);
      running.client = client;
      const stages = await client.stages();
      if (stages) result.useStages(stages);
      const device = await chooseDevice(client, settings.device);
      const options = { ...settings.compileOptions, device, backend: settings.backend };
      if (running.abort.signal.aborted) throw new Error("cancelled before the job started");
      this.status.running(plan.label, "queued");
      const { job_id: jobId } = await client.compile({ code: snippet.code, ...(snippet.entry ? { entry: snippet.entry } : {}), options });
      running.jobId = jobId;
      for await (const raw of client.events(jobId, running.abort.signal)) {
        const event = remapLines<StageEvent>(raw, snippet);
        if (!result.add(event)) continue;
        // A newer compile owns the panel and the status bar (this one was cancelled for it).
        if (this.result === result) {
          panel.post({ type: "event", event });
          this.status.running(plan.label, result.stage());
          if (["lowering", "scheduling", "codegen", "profile", "error"].includes(event.stage)) this.decorations.show(result);
        }
      }
      if (this.result === result) {
        this.status.finished(result.ok !== false, result.summary());
        this.follow(client, result, (e) => remapLines<StageEvent>(e, snippet));
      }
      if (result.traceId) await this.remember(document.uri, result.traceId);
    } catch (err) {
      if (this.result === result) this.fail(err, running.abort.signal.aborted);
    } finally {
      if (this.running === running) this.running = null;
    }
  }

  private async ensureServer(settings: Settings): Promise<KernelscopeClient> {
    const env: Record<string, string> = {};
    // A Kernelscope checkout opened as the workspace: run its own code.
    if (settings.cwd) {
      try {
        await vscode.workspace.fs.stat(vscode.Uri.joinPath(vscode.Uri.file(settings.cwd), "kernelscope", "__init__.py"));
        env.PYTHONPATH = settings.cwd;
      } catch { /* not a checkout */ }
    }
    this.client = await this.server.ensure({ ...settings, env });
    return this.client;
  }

  private fail(err: unknown, cancelled: boolean): void {
    const panel = KernelscopePanel.current;
    if (cancelled) {
      panel?.post({ type: "failure", kind: "cancelled", message: "The compile was cancelled." });
      this.status.finished(false, "cancelled");
      return;
    }
    if (err instanceof SetupError) {
      panel?.post({ type: "failure", kind: "setup", message: `${err.message} ${err.fix}` });
      this.status.finished(false, "not started");
      void vscode.window.showErrorMessage(`Kernelscope: ${err.message} ${err.fix}`, "Open Settings").then((c) => {
        if (c) void vscode.commands.executeCommand("workbench.action.openSettings", "kernelscope");
      });
      return;
    }
    const kind = err instanceof ApiError ? err.kind : "client";
    const message = err instanceof Error ? err.message : String(err);
    this.log.appendLine(`compile failed: ${message}`);
    panel?.post({ type: "failure", kind, message });
    this.status.finished(false, message.slice(0, 60));
    void vscode.window.showErrorMessage(`Kernelscope: ${message}`);
  }

  /**
   * Stops the running job. A server that cancels it ends the stream itself (an `error` of
   * kind `cancelled`, then `done`, and the partial trace is stored), so the stream is read to
   * its end, for 10 s at most; otherwise the extension stops following the job.
   */
  async cancel(): Promise<void> {
    const running = this.running;
    if (!running) return;
    let answer: "cancelled" | "finished" | "unsupported" | "failed" = "unsupported";
    try {
      if (running.jobId && running.client) answer = await running.client.cancel(running.jobId);
    } catch (err) {
      answer = "failed";
      this.log.appendLine(`cancel failed: ${(err as Error).message}`);
    }
    if (answer === "cancelled" || answer === "finished") {
      setTimeout(() => running.abort.abort(), 10_000).unref?.();
      return;
    }
    running.abort.abort();
    if (this.running === running) this.running = null;
    if (answer === "unsupported") {
      void vscode.window.showInformationMessage("Kernelscope: stopped following the job (this server cannot cancel jobs; it finishes on its own).");
    }
  }

  get isRunning(): boolean {
    return this.running !== null;
  }

  /** The server's id of the running job, once the server has accepted it. */
  get jobId(): string | null {
    return this.running?.jobId ?? null;
  }

  /**
   * Follows what the server still runs for the trace after `done` (its follow-ups: Inductor),
   * into the panel and the status bar, until each one is stored or lost (followups.ts).
   */
  private follow(client: KernelscopeClient, result: CompileResult, map?: (e: StageEvent) => StageEvent): void {
    if (!result.followUpsPending()) return;
    const abort = new AbortController();
    this.following = abort;
    const post = (states: Record<string, string>, events: StageEvent[]) =>
      KernelscopePanel.current?.post({ type: "followUps", states, events });
    post(result.followUpStates(), []);
    this.followUps = watchFollowUps(client, result, {
      signal: abort.signal, pollMs: this.followUpPollMs, map,
      onUpdate: (states, events) => {
        if (this.result !== result) return;
        post(states, events);
        this.status.finished(result.ok !== false, result.summary());
      },
    }).catch((err: unknown) => this.log.appendLine(`follow-ups: ${(err as Error).message}`));
  }

  private setResult(result: CompileResult): void {
    this.following?.abort();
    this.following = null;
    this.result = result;
    this.documents.remember(result);
    this.decorations.show(result);
  }

  /**
   * Shows a stored trace (a permalink): its code in a new editor, its events in the panel. A
   * big one (over 1 MiB, stored in parts or not) comes as its head; the panel asks for each
   * graph's part when it shows that graph (`sendPart`). The first graph's is read beside
   * the head, as the web UI reads a trace stored in parts, and sent with it: the panel
   * draws nothing before it has that part, and a round trip through the webview's frames
   * costs 0.1-0.5 s on a loaded host.
   */
  async openTrace(client: KernelscopeClient, id: string): Promise<void> {
    const first = client.partText(id, "g0"); // a small trace has none: 404, ignored
    first.catch(() => {});
    const trace = await client.head(id, true);
    const doc = await vscode.workspace.openTextDocument({ content: trace.code, language: "python" });
    // An open panel is sent the trace before the editor shows its code (the editor's marks
    // follow it); a new one opens beside that editor.
    const panel = KernelscopePanel.current;
    if (!panel) await vscode.window.showTextDocument(doc, vscode.ViewColumn.One);
    const title: TraceTitle = { file: `trace ${trace.id}`, region: String(trace.options?.entry ?? "permalink"), traceId: trace.id,
      server: client.base, document: doc.uri.toString() };
    const result = new CompileResult(`r${++this.counter}`, doc.uri.toString(), title);
    result.addAll(trace.events);
    result.setFollowUps(trace.follow_ups ?? {});
    if (Object.keys(trace.parts ?? {}).length) result.stored = trace.id;
    const message = this.traceMessage(result); // the head, before the result merges a part
    this.setResult(result);
    // The part goes to the panel as the server sent it; the host parses and merges it after.
    const g0 = trace.parts?.g0 === undefined ? undefined : await first.catch(() => undefined);
    KernelscopePanel.createOrShow(this.context.extensionUri).post(g0 ? { ...message, parts: { g0 } } : message);
    if (g0) void this.mergeFirst(result, g0);
    this.status.finished(result.ok !== false, result.summary());
    this.client = client;
    this.follow(client, result);
    if (panel) await vscode.window.showTextDocument(doc, vscode.ViewColumn.One);
  }

  private traceMessage(result: CompileResult): Extract<HostToWebview, { type: "trace" }> {
    return { type: "trace", title: result.title, events: JSON.stringify(result.panelEvents()), ...(result.stored ? { stored: result.stored } : {}) };
  }

  /** The first graph's part, sent to the panel with the head, merged into the result (the
   * editor's marks and kernel documents); one that is not JSON is read again when asked. */
  private async mergeFirst(result: CompileResult, text: string): Promise<void> {
    try {
      await result.part("g0", async () => JSON.parse(text) as TracePart);
      if (this.result === result) this.decorations.show(result);
    } catch (err) {
      this.log.appendLine(`part g0 of trace ${result.stored}: ${(err as Error).message}`);
    }
  }

  /** A part of the current (big, stored) trace, for the panel; the editor's marks grow with it. */
  private async sendPart(trace: string, key: string): Promise<void> {
    const answer = (part: TracePart | null, error?: string) => KernelscopePanel.current?.post(
      { type: "part", trace, key, part: part && JSON.stringify(part), ...(error ? { error } : {}) });
    const result = this.result;
    if (!result || result.stored !== trace) return answer(null, "this trace is no longer the panel's");
    try {
      const client = this.client ?? await this.attachOnly();
      if (!client) throw new Error("no Kernelscope server answers");
      const part = await result.part(key, (k) => client.part(trace, k));
      answer(part);
      if (this.result === result) this.decorations.show(result);
    } catch (err) {
      this.log.appendLine(`part ${key} of trace ${trace}: ${(err as Error).message}`);
      answer(null, (err as Error).message);
    }
  }

  /** The trace ids compiled from a document, oldest first (the last 20). */
  history(uri: vscode.Uri): string[] {
    return this.context.workspaceState.get<Record<string, string[]>>(HISTORY, {})[uri.toString()] ?? [];
  }

  private async remember(uri: vscode.Uri, traceId: string): Promise<void> {
    const all = this.context.workspaceState.get<Record<string, string[]>>(HISTORY, {});
    const list = (all[uri.toString()] ?? []).filter((t) => t !== traceId);
    list.push(traceId);
    all[uri.toString()] = list.slice(-20);
    await this.context.workspaceState.update(HISTORY, all);
  }

  /** The configured server when it answers now, else null (nothing is started). */
  private async attachOnly(): Promise<KernelscopeClient | null> {
    const url = readSettings(undefined).serverUrl;
    if (!url) return null;
    const client = new KernelscopeClient(url);
    try {
      await client.health(1500);
      this.client = client;
      return client;
    } catch {
      return null;
    }
  }

  /** The client of the last server used, for permalinks and diffs. */
  async currentClient(): Promise<KernelscopeClient> {
    if (this.client) return this.client;
    return this.ensureServer(readSettings(vscode.workspace.workspaceFolders?.[0]));
  }

  /** Reveals source lines of the current result in its editor. */
  async reveal(lines: number[]): Promise<void> {
    const uri = this.result?.documentUri;
    if (!uri || !lines.length) return;
    const existing = vscode.window.visibleTextEditors.find((e) => e.document.uri.toString() === uri);
    const doc = existing?.document ?? await vscode.workspace.openTextDocument(vscode.Uri.parse(uri));
    const editor = await vscode.window.showTextDocument(doc, { viewColumn: existing?.viewColumn ?? vscode.ViewColumn.One, preserveFocus: false });
    const first = Math.min(...lines) - 1;
    const last = Math.max(...lines) - 1;
    const range = new vscode.Range(first, 0, last, doc.lineAt(Math.min(last, doc.lineCount - 1)).text.length);
    this.revealing = true;
    editor.selection = new vscode.Selection(range.start, range.end);
    editor.revealRange(range, vscode.TextEditorRevealType.InCenterIfOutsideViewport);
    this.decorations.mark(lines);
  }

  /** The editor's cursor moved in the result's document: select that line in the panel. */
  onEditorSelection(e: vscode.TextEditorSelectionChangeEvent): void {
    if (this.revealing) { this.revealing = false; return; }
    if (!this.result || e.textEditor.document.uri.toString() !== this.result.documentUri) return;
    const s = e.selections[0];
    const lines: number[] = [];
    for (let l = s.start.line; l <= s.end.line && lines.length < 500; l++) lines.push(l + 1);
    KernelscopePanel.current?.post({ type: "selectLines", lines, pin: true });
  }

  private onPanelMessage(m: WebviewToHost): void {
    switch (m.type) {
      case "ready":
        // A panel restored by the serializer (or shown again) has its own state; a panel
        // that has none gets the current result.
        if (!m.restored && this.result?.events.length) {
          KernelscopePanel.current?.post(this.traceMessage(this.result));
          if (this.result.trace.done?.follow_ups?.length) {
            KernelscopePanel.current?.post({ type: "followUps", states: this.result.followUpStates(), events: [] });
          }
        }
        break;
      case "reveal":
        void this.reveal(m.lines);
        break;
      case "cancel":
        void this.cancel();
        break;
      case "part":
        void this.sendPart(m.trace, m.key);
        break;
      case "hover":
        this.decorations.mark(m.lines);
        break;
      case "openKernel":
        if (this.result) void this.documents.open(this.result, m.gid, m.kernel);
        break;
      case "restore":
        // After a reload the host has no result; the restored panel's trace decorates its file again.
        if (!this.result && m.title.document) {
          try {
            const events = traceEvents(m.events);
            if (!events || events.length >= 10_000) throw new Error("not a list of events");
            const result = new CompileResult(`r${++this.counter}`, m.title.document, m.title);
            result.addAll(events);
            result.setFollowUps(m.followUps ?? {});
            result.stored = m.stored ?? null;
            this.setResult(result);
            // A follow-up still running when VS Code reloaded: ask the configured server.
            if (result.followUpsPending()) {
              void this.attachOnly().then((client) => { if (client && this.result === result) this.follow(client, result); });
            }
          } catch (err) {
            this.log.appendLine(`could not restore the panel's trace: ${(err as Error).message}`);
          }
        }
        break;
      case "highlight": {
        const answer = (html: string | null) => KernelscopePanel.current?.post({ type: "highlighted", id: m.id, html });
        // A panel restored after a reload highlights through the configured server if it
        // answers; no server is started just for that.
        const client = this.client ? Promise.resolve(this.client) : this.attachOnly();
        client.then((c) => (c ? c.highlight(m.code, m.language) : null)).then(answer, () => answer(null));
        break;
      }
    }
  }

  dispose(): void {
    this.running?.abort.abort();
    this.following?.abort();
    this.decorations.dispose();
    this.documents.dispose();
    this.status.dispose();
  }
}
