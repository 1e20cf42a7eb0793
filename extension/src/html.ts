/**
 * The webview's HTML: the panel skeleton the panes mount into, with a strict Content
 * Security Policy (`default-src 'none'`; scripts only with this load's nonce; styles,
 * fonts and images only from the extension's own folder via `webview.cspSource`, plus
 * inline styles; workers only from `blob:`, the graph layout's bundled worker).
 * Pure, so the browser test renders exactly what the panel shows.
 */

import { randomBytes } from "node:crypto";

export interface HtmlParts {
  cspSource: string;
  scriptUri: string;
  styleUri: string;
  nonce?: string;
}

export const makeNonce = () => randomBytes(18).toString("base64").replace(/[^A-Za-z0-9]/g, "");

const attr = (s: string) => s.replace(/&/g, "&amp;").replace(/"/g, "&quot;").replace(/</g, "&lt;");

export function renderHtml({ cspSource, scriptUri, styleUri, nonce = makeNonce() }: HtmlParts): string {
  const csp = [
    "default-src 'none'",
    `script-src 'nonce-${nonce}'`,
    // Inline styles are allowed (scripts never are): cytoscape injects a <style> element and
    // the panes colour elements through style attributes (provenance colours, bar widths).
    `style-src ${cspSource} 'unsafe-inline'`,
    `img-src ${cspSource} data:`,
    `font-src ${cspSource}`,
    // The graph layout's worker: its script is bundled in webview.js and started from a Blob
    // URL (a worker script must be same-origin, and the extension's files are not).
    "worker-src blob:",
  ].join("; ");
  return `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta http-equiv="Content-Security-Policy" content="${attr(csp)}">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <link rel="stylesheet" href="${attr(styleUri)}">
  <title>Kernelscope</title>
</head>
<body class="ks-webview">
  <header class="ks-title"><span class="logo"></span><span id="ks-title">Kernelscope</span>
    <span class="hint" id="ks-hint">Run "Kernelscope: Compile Selection" in a Python file.</span></header>
  <div id="status-host"></div>
  <section id="ks-diff" class="ks-diff" hidden>
    <div class="col-head">Diff <span class="hint" id="ks-diff-title"></span>
      <a href="#" id="ks-diff-close">back to the trace</a></div>
    <div id="ks-diff-host" class="col-body"></div>
  </section>
  <main class="ks-workspace">
    <section class="col code-col">
      <div class="col-head">Generated code <span class="hint">double-click a kernel to open it as a document</span></div>
      <div id="code-host" class="col-body"></div>
    </section>
    <section class="col tabs-col">
      <nav id="tabs" class="tabs" role="tablist"></nav>
      <div id="tab-host" class="col-body"></div>
    </section>
  </main>
  <script type="module" nonce="${nonce}" src="${attr(scriptUri)}"></script>
</body>
</html>
`;
}
