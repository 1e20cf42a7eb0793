// Memory pane: the buffer plan (memory.graphs[]) as a lifetime chart. Columns are the
// kernels in execution order, each buffer a bar from the kernel that writes it to the last
// one that reads it. A buffer that takes over a dead buffer's storage shares its colour and
// is joined to it by a dashed link. Below: live bytes per step and the peak with and
// without reuse.

import { h, clear, fmtBytes, plural } from "../dom.js";
import { fromBuffer, fromKernel } from "../provenance.js";
import { Pane } from "./pane.js";

/** @typedef {import("../trace.js").Trace} Trace */
/** @typedef {import("../../types/events").StageName} StageName */

const SLOT_HUES = [205, 30, 140, 280, 350, 60, 175, 250, 100, 320];
const ROW_H = 22;
const MAX_COL_W = 74; // the widest column; a graph of many kernels gets narrower ones to fit
const MIN_COL_W = 2;
const LABELLED_COL_W = 22; // narrower columns name their kernel only in the tooltip
const LABEL_W = 120;
const HEAD_H = 84;

export class MemoryPane extends Pane {
  id = "memory";
  title = "Memory";
  stages = ["memory"];
  placeholder = "The buffer plan appears here after memory planning.";

  constructor(ctx) {
    super(ctx, "div.pane-body.memory-pane");
    this.bars = new Map();
    this.reset();
  }

  forget() {
    this.bars.clear();
    this.trace = null;
    this.width = 0;
  }

  /** @param {Trace} trace */
  render(trace) {
    this.trace = trace;
    this.width = this.el.clientWidth;
    this.bars.clear();
    clear(this.el, trace.graphs("memory").map((g) => h("section", { dataset: { graph: g.id } },
      h("h3", `${trace.graph("capture", g.id)?.kind ?? "graph"} ${g.id}`,
        h("span.hint", `${plural(g.buffers.length, "buffer")} over ${plural(g.steps.length, "kernel")}`)),
      this.peaks(g), this.saved(g), this.chart(g),
      h("details.plan", h("summary", "Allocation plan"),
        h("pre.code-plain", (g.lines ?? []).join("\n"))))));
    this.select(this.ctx.current());
    return true;
  }

  /** @param {import("../../types/events").MemoryGraph} g */
  peaks(g) {
    const max = Math.max(g.peak_bytes_no_reuse ?? 0, g.peak_bytes ?? 0, 1);
    const saved = g.peak_bytes_no_reuse ? 1 - g.peak_bytes / g.peak_bytes_no_reuse : 0;
    const bar = (label, bytes, cls) => h("div.hbar-row",
      h("span.hbar-label", label),
      h("span.hbar-track", h(`span.hbar.${cls}`, { style: { width: `${(100 * bytes) / max}%` } })),
      h("span.hbar-value", fmtBytes(bytes)));
    return h("div.peaks",
      bar("peak with reuse", g.peak_bytes, "good"),
      bar("peak without reuse", g.peak_bytes_no_reuse, "base"),
      h("div.note", saved > 0 ? `Reuse saves ${(saved * 100).toFixed(0)}% of peak memory.`
        : "Reuse does not lower the peak here."));
  }

  // Training: what the forward graph keeps alive for the backward graph (memory.saved:
  // the backward graph's inputs other than its tangents, and the buffer holding each).
  /** @param {import("../../types/events").MemoryGraph} g */
  saved(g) {
    if (!g.saved?.length) return null;
    const total = g.saved.reduce((n, s) => n + (s.bytes ?? 0), 0);
    return h("div.saved-acts",
      h("h4", `Saved for backward: ${plural(g.saved.length, "tensor")}`,
        h("span.hint", `${fmtBytes(total)} in buffers this graph writes; they live until backward runs`)),
      h("table.grid", h("thead", h("tr", ["saved", "held in", "size", "backward input"].map((c) => h("th", c)))),
        h("tbody", g.saved.map((s) => {
          const tr = h("tr", { dataset: { saved: s.node } }, h("td.mono", s.node),
            h("td.mono", s.buffer ?? "graph input (no new memory)"),
            h("td.num", s.bytes != null ? fmtBytes(s.bytes) : "–"), h("td.mono", s.backward_input ?? "–"));
          if (s.buffer) {
            tr.addEventListener("mouseenter", () => this.ctx.hover(fromBuffer(this.ctx.index(), g.id, s.buffer)));
            tr.addEventListener("mouseleave", () => this.ctx.unhover());
          }
          return tr;
        }))));
  }

  // Storage slots: a buffer that reuses another takes its slot (and colour).
  /** @param {import("../../types/events").MemoryGraph} g */
  slots(g) {
    const slot = new Map();
    let next = 0;
    for (const b of g.buffers) {
      slot.set(b.name, b.reused_from && slot.has(b.reused_from) ? slot.get(b.reused_from) : next++);
    }
    return slot;
  }

  /** @param {import("../../types/events").MemoryGraph} g */
  chart(g) {
    const slot = this.slots(g);
    const lastStep = Math.max(g.steps.length - 1, 0);
    const span = (b) => [Math.min(b.first, lastStep), Math.min(Math.max(b.last, b.first), lastStep)];
    // Every kernel's column in the pane's width (the chart is its own overview): narrower
    // columns down to MIN_COL_W, and only then a horizontal scroll.
    const room = (this.width || this.el.clientWidth || 800) - LABEL_W - 110;
    const COL_W = Math.max(MIN_COL_W, Math.min(MAX_COL_W, Math.floor(room / Math.max(g.steps.length, 1))));
    const labelled = COL_W >= LABELLED_COL_W;
    const width = LABEL_W + g.steps.length * COL_W + 80;
    const live = g.steps.map((_, s) => g.buffers
      .filter((b) => span(b)[0] <= s && s <= span(b)[1]).reduce((n, b) => n + b.bytes, 0));
    const maxLive = Math.max(...live, 1);
    const liveTop = HEAD_H + g.buffers.length * ROW_H + 14;
    const height = liveTop + 64;
    const x = (step) => LABEL_W + step * COL_W;
    const heads = g.steps.map((name, s) => {
      const t = h("g.step", h("title", name),
        h("rect.col", { x: x(s), y: 0, width: COL_W, height: liveTop - 6 }),
        h("rect.kswatch", { x: x(s) + COL_W / 12, y: HEAD_H - 14, width: COL_W * 5 / 6, height: 5, rx: 2,
          style: `fill: ${this.ctx.kernelColour(g.id, name)}` }),
        labelled ? h("text.step-label", { transform: `translate(${x(s) + COL_W / 2 - 4},${HEAD_H - 20}) rotate(-35)` },
          name.length > 20 ? `${name.slice(0, 19)}…` : name) : null);
      t.addEventListener("mouseenter", () => this.ctx.hover(fromKernel(this.ctx.index(), g.id, name)));
      t.addEventListener("mouseleave", () => this.ctx.unhover());
      return t;
    });
    const saved = new Set((g.saved ?? []).map((s) => s.buffer).filter(Boolean));
    // Buffers a collective holds until its wait_tensor (its input, its result).
    const held = new Map((g.holds ?? []).map((x) => [x.buffer, x]));
    const inset = Math.min(4, COL_W / 4);
    const rows = g.buffers.map((b, i) => {
      const [first, last] = span(b);
      const y = HEAD_H + i * ROW_H;
      const hue = SLOT_HUES[slot.get(b.name) % SLOT_HUES.length];
      const hold = held.get(b.name);
      const bar = h(`g.mbar${saved.has(b.name) ? ".saved" : ""}${hold ? ".held" : ""}`, { dataset: { buffer: b.name } },
        h("title", `${b.name}: ${fmtBytes(b.bytes)}, live ${g.steps[first]} → ${g.steps[last]}` +
          `${b.reused_from ? `, reuses ${b.reused_from}'s storage` : ""}${b.output ? ", graph output" : ""}` +
          `${hold ? `, held by ${hold.collective} (its ${hold.why}) until ${hold.wait || "the graph returns"}` : ""}`),
        h("text.row-label", { x: 8, y: y + 15 }, b.name,
          saved.has(b.name) ? " (saved)" : hold ? " (held)" : b.output ? " (out)" : ""),
        h("rect", { x: x(first) + inset, y: y + 3, width: Math.max(2, (last - first + 1) * COL_W - 2 * inset),
          height: ROW_H - 6, rx: 4, style: `fill: hsl(${hue} 60% 45%); stroke: hsl(${hue} 70% 65%)` }),
        h("text.bytes", { x: x(last + 1) + 6, y: y + 15 }, fmtBytes(b.bytes)));
      bar.addEventListener("mouseenter", () => this.ctx.hover(fromBuffer(this.ctx.index(), g.id, b.name)));
      bar.addEventListener("mouseleave", () => this.ctx.unhover());
      bar.addEventListener("click", () => this.ctx.pin(fromBuffer(this.ctx.index(), g.id, b.name)));
      this.bars.set(`${g.id}:${b.name}`, bar);
      return bar;
    });
    const links = g.buffers.filter((b) => b.reused_from).map((b) => {
      const j = g.buffers.findIndex((o) => o.name === b.reused_from);
      if (j < 0) return null;
      const from = g.buffers[j];
      const x1 = x(span(from)[1] + 1) - 4, y1 = HEAD_H + j * ROW_H + ROW_H / 2;
      const x2 = x(span(b)[0]) + 4, y2 = HEAD_H + g.buffers.indexOf(b) * ROW_H + ROW_H / 2;
      return h("g.reuse", h("title", `${b.name} reuses ${from.name}'s storage`),
        h("path", { d: `M${x1},${y1} C${x1 + 24},${y1} ${x2 - 24},${y2} ${x2},${y2}` }),
        h("text", { x: (x1 + x2) / 2 + 4, y: (y1 + y2) / 2 - 3 }, "reuse"));
    });
    const liveBars = live.map((bytes, s) => {
      const hgt = (40 * bytes) / maxLive;
      return h("g.live", h("title", `${fmtBytes(bytes)} live during ${g.steps[s]}`),
        h("rect", { x: x(s) + COL_W / 7, y: liveTop + 44 - hgt, width: COL_W * 5 / 7, height: hgt, rx: 2 }),
        COL_W >= MAX_COL_W / 1.3 ? h("text", { x: x(s) + COL_W / 2, y: liveTop + 58, "text-anchor": "middle" }, fmtBytes(bytes)) : null);
    });
    return h("div.chart-wrap", h("svg.lifetimes", { width, height, viewBox: `0 0 ${width} ${height}` },
      heads, rows, links,
      h("text.row-label", { x: 8, y: liveTop + 30 }, "live bytes"), liveBars));
  }

  // A new width (a resize, a maximised column) fits the columns again.
  shown() {
    if (this.trace && Math.abs(this.el.clientWidth - this.width) > 40) this.render(this.trace);
  }

  select(sel) {
    for (const [key, bar] of this.bars) bar.classList.toggle("hl", sel.buffers.has(key));
  }
}
