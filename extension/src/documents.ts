/**
 * Generated code as read-only virtual documents: `kernelscope:/<result>/<graph>/<name>.<ext>`
 * (`.py` for Triton kernels and wrappers, `.cpp` for C++ kernels), so VS Code highlights
 * them with its own Python and C++ grammars, and they cannot be edited or saved.
 */

import * as vscode from "vscode";
import type { CompileResult, GeneratedCode } from "./result";

export const SCHEME = "kernelscope";
/** The file extension of each language id a result's code has (anything else reads as Python). */
const EXTENSIONS: Record<string, string> = { python: "py", cpp: "cpp" };
const KERNEL_PATH = new RegExp(`^/([^/]+)/(\\d+)/(.+)\\.(${Object.values(EXTENSIONS).join("|")})$`);

export function kernelUri(resultId: string, code: Pick<GeneratedCode, "gid" | "name" | "language">): vscode.Uri {
  const ext = EXTENSIONS[code.language] ?? "py";
  return vscode.Uri.from({ scheme: SCHEME, path: `/${resultId}/${code.gid}/${code.name}.${ext}` });
}

export class KernelDocuments implements vscode.TextDocumentContentProvider {
  private results = new Map<string, CompileResult>();
  private changed = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.changed.event;

  /** Keeps a result's code available (the last few results, so old documents still open). */
  remember(result: CompileResult): void {
    this.results.delete(result.id);
    this.results.set(result.id, result);
    while (this.results.size > 8) this.results.delete(this.results.keys().next().value as string);
  }

  lookup(uri: vscode.Uri): GeneratedCode | null {
    const m = KERNEL_PATH.exec(uri.path);
    if (!m) return null;
    return this.results.get(m[1])?.code(Number(m[2]), m[3]) ?? null;
  }

  provideTextDocumentContent(uri: vscode.Uri): string {
    const code = this.lookup(uri);
    return code ? code.source : "# This generated code is no longer available: compile again.\n";
  }

  /** Opens a kernel (or "wrapper") of `result` beside the editor, highlighted, read-only. */
  async open(result: CompileResult, gid: number, name: string): Promise<vscode.TextEditor | null> {
    const code = result.code(gid, name);
    if (!code) return null;
    this.remember(result);
    const doc = await vscode.workspace.openTextDocument(kernelUri(result.id, code));
    const typed = doc.languageId === code.language ? doc : await vscode.languages.setTextDocumentLanguage(doc, code.language);
    return vscode.window.showTextDocument(typed, { viewColumn: vscode.ViewColumn.Beside, preview: true, preserveFocus: false });
  }

  dispose(): void {
    this.changed.dispose();
  }
}
