/**
 * The status bar item: the running job's stage (click: cancel it), then the result's
 * summary (click: show the panel), or the error.
 */

import * as vscode from "vscode";

export class JobStatus {
  readonly item = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Left, 50);

  running(label: string, stage: string): void {
    this.item.text = `$(sync~spin) Kernelscope: ${stage}`;
    this.item.tooltip = `Compiling ${label}. Click to cancel.`;
    this.item.command = "kernelscope.cancel";
    this.item.backgroundColor = undefined;
    this.item.show();
  }

  finished(ok: boolean, summary: string): void {
    this.item.text = `${ok ? "$(check)" : "$(error)"} Kernelscope: ${summary}`;
    this.item.tooltip = "Show the Kernelscope panel";
    this.item.command = "kernelscope.showPanel";
    this.item.backgroundColor = ok ? undefined : new vscode.ThemeColor("statusBarItem.errorBackground");
    this.item.show();
  }

  dispose(): void {
    this.item.dispose();
  }
}
