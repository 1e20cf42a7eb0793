/**
 * The compile result back in the editor: every source line that produced code gets the
 * panel's colour for that line (the web UI's own `lineColour`), lines selected in the panel
 * get a stronger mark, and a hover lists the line's kernels with time and % of peak, with
 * links into the panel and to each kernel's code. The error's line, graph breaks and ATen
 * fallbacks become diagnostics (source "Kernelscope").
 */

import * as vscode from "vscode";
import { lineColour } from "../../webui/js/provenance.js";
import type { CompileResult } from "./result";

/** "hsl(210, 75%, 60%)" with an alpha: the panel's line colour as a faint background. */
export const withAlpha = (hsl: string, alpha: number) => hsl.replace(/^hsl\((.*)\)$/, `hsla($1, ${alpha})`);

const fmtMs = (ms: number) => (ms >= 1 ? `${ms.toFixed(2)} ms` : `${(ms * 1000).toFixed(1)} µs`);

/** The hover's Markdown for `line` of `result`, or null when the line produced nothing. */
export function hoverMarkdown(result: CompileResult, line: number): string | null {
  const kernels = result.lineKernels().get(line);
  if (!kernels) return null;
  const out = [`**Kernelscope** · line ${line} · ${result.title.region}`, ""];
  const args = (x: unknown) => encodeURIComponent(JSON.stringify(x));
  if (kernels.length) {
    out.push("| kernel | time | % of peak |", "|---|---:|---:|");
    for (const k of kernels) {
      const link = k.kind === "extern" ? `\`${k.name}\`` :
        `[\`${k.name}\`](command:kernelscope.openKernel?${args([result.id, k.gid, k.name])} "open the generated code")`;
      out.push(`| ${link} | ${k.ms === null ? "–" : fmtMs(k.ms)} | ${k.pctPeak === null ? "–" : `${k.pctPeak.toFixed(1)} %`} |`);
    }
  } else {
    out.push("FX nodes only: no kernel of its own (folded into a view or an input).");
  }
  out.push("", `[Show in the Kernelscope panel](command:kernelscope.showLines?${args([line])})`);
  return out.join("\n");
}

export class SourceDecorations implements vscode.HoverProvider {
  private byColour = new Map<string, vscode.TextEditorDecorationType>();
  private selected = vscode.window.createTextEditorDecorationType({
    backgroundColor: "rgba(255, 209, 102, 0.22)",
    border: "1px solid rgba(255, 209, 102, 0.7)",
    isWholeLine: true,
    overviewRulerColor: "rgba(255, 209, 102, 0.9)",
    overviewRulerLane: vscode.OverviewRulerLane.Center,
  });
  private diagnostics = vscode.languages.createDiagnosticCollection("kernelscope");
  result: CompileResult | null = null;

  private typeFor(colour: string): vscode.TextEditorDecorationType {
    let type = this.byColour.get(colour);
    if (!type) {
      type = vscode.window.createTextEditorDecorationType({
        backgroundColor: withAlpha(colour, 0.13),
        borderColor: colour,
        borderStyle: "solid",
        borderWidth: "0 0 0 3px",
        isWholeLine: true,
        overviewRulerColor: withAlpha(colour, 0.8),
        overviewRulerLane: vscode.OverviewRulerLane.Left,
      });
      this.byColour.set(colour, type);
    }
    return type;
  }

  /** The editors showing the result's document. */
  editors(): vscode.TextEditor[] {
    const uri = this.result?.documentUri;
    return uri ? vscode.window.visibleTextEditors.filter((e) => e.document.uri.toString() === uri) : [];
  }

  /** Colours the lines that produced code, in every editor showing the result's file. */
  show(result: CompileResult | null): void {
    this.result = result;
    for (const editor of vscode.window.visibleTextEditors) this.apply(editor);
    this.diagnose();
  }

  apply(editor: vscode.TextEditor): void {
    const mine = this.result?.documentUri === editor.document.uri.toString();
    const ranges = new Map<string, vscode.Range[]>();
    if (mine && this.result) {
      for (const line of this.result.lineKernels().keys()) {
        if (line < 1 || line > editor.document.lineCount) continue;
        const colour = lineColour(line);
        const list = ranges.get(colour) ?? [];
        list.push(new vscode.Range(line - 1, 0, line - 1, 0));
        ranges.set(colour, list);
        this.typeFor(colour);
      }
    }
    for (const [colour, type] of this.byColour) editor.setDecorations(type, ranges.get(colour) ?? []);
    if (!mine) editor.setDecorations(this.selected, []);
  }

  /** Marks the lines a selection in the panel points at (an empty list clears the mark). */
  mark(lines: number[]): void {
    for (const editor of this.editors()) {
      editor.setDecorations(this.selected, lines.filter((l) => l >= 1 && l <= editor.document.lineCount)
        .map((l) => new vscode.Range(l - 1, 0, l - 1, 0)));
    }
  }

  /** The result's error, graph breaks and fallbacks as diagnostics on the file's lines. */
  private diagnose(): void {
    this.diagnostics.clear();
    const uri = this.result?.documentUri;
    if (!uri || !this.result) return;
    const severity = { error: vscode.DiagnosticSeverity.Error, warning: vscode.DiagnosticSeverity.Warning,
      info: vscode.DiagnosticSeverity.Information };
    const list = this.result.notes().map((n) => {
      const d = new vscode.Diagnostic(new vscode.Range(n.line - 1, 0, n.line - 1, 1000), n.message, severity[n.severity]);
      d.source = "Kernelscope";
      return d;
    });
    this.diagnostics.set(vscode.Uri.parse(uri), list);
  }

  provideHover(document: vscode.TextDocument, position: vscode.Position): vscode.Hover | null {
    if (!this.result || document.uri.toString() !== this.result.documentUri) return null;
    const text = hoverMarkdown(this.result, position.line + 1);
    if (!text) return null;
    const md = new vscode.MarkdownString(text);
    md.isTrusted = { enabledCommands: ["kernelscope.openKernel", "kernelscope.showLines"] };
    return new vscode.Hover(md, new vscode.Range(position.line, 0, position.line, 0));
  }

  dispose(): void {
    for (const type of this.byColour.values()) type.dispose();
    this.selected.dispose();
    this.diagnostics.dispose();
  }
}
