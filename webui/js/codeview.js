// A read-only code block with line numbers, one element per line so provenance can mark
// single lines. Shows plain text at once, then swaps in Pygments HTML from the server when
// it arrives; if highlighting fails or does not line up with the source, stays plain.

import { h, escapeHtml } from "./dom.js";
import { highlight as serverHighlight } from "./api.js";
import { markBidiHtml } from "./bidi.js";

// Splits Pygments HTML (one element per line, ids "L-<n>") into per-line HTML, or returns
// null when the lines do not match `source` exactly.
export function splitHighlighted(html, source) {
  const expected = source.replace(/\n$/, "").split("\n");
  const tpl = document.createElement("template");
  tpl.innerHTML = html;
  const byNumber = new Map();
  for (const el of tpl.content.querySelectorAll("[id^='L-']")) {
    const n = Number(el.id.slice(2));
    if (Number.isInteger(n)) byNumber.set(n, el);
  }
  const lines = [];
  for (let i = 0; i < expected.length; i++) {
    const el = byNumber.get(i + 1);
    if (!el) {
      if (expected[i] === "") { lines.push(""); continue; }
      return null;
    }
    if (el.textContent.replace(/\n$/, "") !== expected[i]) return null;
    lines.push(el.innerHTML.replace(/\n(<\/span>)*$/, "$1").replace(/\n$/, ""));
  }
  return lines;
}

// Renders `source`; `decorate(lineNumber, el)` may add classes, data and listeners;
// `highlight(code, language)` (a promise of Pygments HTML or null) colours it: the pane's
// `ctx.highlight` when it has one, else api.js's (POST /api/highlight; the VS Code
// webview's build puts its own module in api.js's place); null keeps it plain.
// Returns the block element; its `lineEls` maps line numbers to line elements.
/**
 * @param {string} source
 * @param {string} language
 * @param {(line: number, el: HTMLElement) => void} [decorate]
 * @param {(code: string, language: string) => Promise<string | null>} [highlight]
 */
export function codeBlock(source, language, decorate = () => {}, highlight = serverHighlight) {
  const text = source.replace(/\n$/, "").split("\n");
  const lineEls = new Map();
  const rows = text.map((line, i) => {
    const content = h("span.ct", { html: markBidiHtml(escapeHtml(line)) || " " });
    const row = h("div.cl", h("span.ln", String(i + 1)), content);
    row.dataset.line = String(i + 1);
    lineEls.set(i + 1, row);
    decorate(i + 1, row);
    return row;
  });
  const block = h("div.code.highlight", { dataset: { language } }, rows);
  block.lineEls = lineEls;
  if (!highlight) {
    block.dataset.highlight = "plain";
    return block;
  }
  highlight(source, language).then((html) => {
    const lines = html && splitHighlighted(html, source);
    if (!lines) {
      block.dataset.highlight = "plain";
      return;
    }
    lines.forEach((htmlLine, i) => {
      lineEls.get(i + 1).querySelector(".ct").innerHTML = markBidiHtml(htmlLine) || " ";
    });
    block.dataset.highlight = "pygments";
  });
  return block;
}
