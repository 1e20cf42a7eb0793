/**
 * The Kernelscope panel: one webview beside the editor showing the web UI's panes. One
 * class owns it: `createOrShow` (a command), `revive` (the serializer, after a reload),
 * `dispose`. The webview loads only the extension's own files (`localResourceRoots`,
 * `asWebviewUri`) under a nonce CSP, keeps its state with setState (no
 * retainContextWhenHidden), and talks to the host only in protocol.ts messages.
 */

import * as vscode from "vscode";
import { renderHtml } from "./html";
import { HostToWebview, WebviewToHost, isWebviewToHost } from "./protocol";

export const VIEW_TYPE = "kernelscope.panel";

export class KernelscopePanel {
  static current: KernelscopePanel | null = null;
  /** Set by the extension: where the panel's messages go. */
  static onMessage: (m: WebviewToHost, panel: KernelscopePanel) => void = () => {};

  private disposables: vscode.Disposable[] = [];
  private ready = false;
  private disposed = false;
  private queue: HostToWebview[] = [];

  static options(extensionUri: vscode.Uri): vscode.WebviewOptions & vscode.WebviewPanelOptions {
    return { enableScripts: true, localResourceRoots: [vscode.Uri.joinPath(extensionUri, "dist")] };
  }

  /** Shows the panel beside the active editor, creating it if needed. */
  static createOrShow(extensionUri: vscode.Uri, preserveFocus = true): KernelscopePanel {
    if (KernelscopePanel.current) {
      KernelscopePanel.current.panel.reveal(undefined, preserveFocus);
      return KernelscopePanel.current;
    }
    const panel = vscode.window.createWebviewPanel(VIEW_TYPE, "Kernelscope",
      { viewColumn: vscode.ViewColumn.Beside, preserveFocus }, KernelscopePanel.options(extensionUri));
    KernelscopePanel.current = new KernelscopePanel(panel, extensionUri);
    return KernelscopePanel.current;
  }

  /** Takes over a panel VS Code restored after a reload; its webview state comes back by itself. */
  static revive(panel: vscode.WebviewPanel, extensionUri: vscode.Uri): KernelscopePanel {
    KernelscopePanel.current?.dispose();
    panel.webview.options = KernelscopePanel.options(extensionUri);
    KernelscopePanel.current = new KernelscopePanel(panel, extensionUri);
    return KernelscopePanel.current;
  }

  private constructor(readonly panel: vscode.WebviewPanel, private readonly extensionUri: vscode.Uri) {
    const webview = panel.webview;
    const asset = (name: string) => webview.asWebviewUri(vscode.Uri.joinPath(extensionUri, "dist", name)).toString();
    webview.html = renderHtml({ cspSource: webview.cspSource, scriptUri: asset("webview.js"), styleUri: asset("webview.css") });
    this.disposables.push(
      webview.onDidReceiveMessage((m: unknown) => {
        if (!isWebviewToHost(m)) return; // the webview is untrusted input
        if (m.type === "ready") this.flush();
        KernelscopePanel.onMessage(m, this);
      }),
      panel.onDidDispose(() => this.dispose()),
      // A hidden webview is torn down; it posts `ready` again when shown.
      panel.onDidChangeViewState(() => { if (!panel.visible) this.ready = false; }),
    );
  }

  /** Posts a message, holding it until the webview script has said it is ready. */
  post(message: HostToWebview): void {
    if (this.disposed) return; // closed during a compile: the job goes on for the editor
    if (!this.ready) {
      // Only the latest state matters for a webview that is not listening yet.
      if (message.type === "reset" || message.type === "trace") this.queue = [];
      if (message.type !== "selectLines" && message.type !== "highlighted") this.queue.push(message);
      return;
    }
    void this.panel.webview.postMessage(message);
  }

  private flush(): void {
    this.ready = true;
    const queued = this.queue;
    this.queue = [];
    for (const m of queued) void this.panel.webview.postMessage(m);
  }

  get visible(): boolean {
    return this.panel.visible;
  }

  dispose(): void {
    this.disposed = true;
    if (KernelscopePanel.current === this) KernelscopePanel.current = null;
    for (const d of this.disposables.splice(0)) d.dispose();
    this.panel.dispose();
  }
}
