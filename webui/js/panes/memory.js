// Memory pane: the buffer plan (memory.graphs[]) as a lifetime chart. Columns are the
// kernels in execution order, each buffer a bar from the kernel that writes it to the last
// one that reads it. A buffer that takes over a dead buffer's storage shares its colour and
// is joined to it by a dashed link. Below: live bytes per step and the peak with and
// without reuse.

import { h, clear, fmtBytes, plural, growing, whenNear } from "../dom.js";
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
const ROWS_NEAR = 600; // px of rows drawn beyond the chart's view, above and below

export class MemoryPane extends Pane {
  id = "memory";
  title = "Memory";
  stages = ["memory"];
  placeholder = "The buffer plan appears here after memory planning.";

  constructor(ctx) {
    super(ctx, "div.pane-body.memory-pane");
    this.bars = new Map(); // "gid:buffer" -> its drawn row
    this.rows = new Map(); // "gid:buffer" -> draws its row
    this.marked = new Set();
    this.scrolled = new Map(); // graph id -> its chart's scrollTop
    this.reset();
  }

  forget() {
    this.bars.clear();
    this.rows.clear();
    this.marked = new Set();
    this.scrolled = new Map();
    this.trace = null;
    this.width = 0;
  }

  /** @param {Trace} trace */
  render(trace) {
    this.trace = trace;
    this.width = this.el.clientWidth;
    this.bars.clear();
    this.rows.clear();
    // A graph after the first is drawn when its place nears the view (a training step's
    // backward graph is below its forward one).
    clear(this.el, trace.graphs("memory").map((g, i) => (i === 0 ? this.section(trace, g)
      : whenNear(h("section.pending-graph", { dataset: { graph: g.id } }, this.heading(trace, g)),
        () => this.section(trace, g), () => this.drawn()))));
    this.drawn();
    return true;
  }

  // Drawn again (a new width), a chart keeps the rows that were in view: each chart's
  // scroll is noted as it scrolls and set again on its new wrap.
  drawn() {
    for (const wrap of this.el.querySelectorAll(".chart-wrap")) {
      const top = this.scrolled.get(wrap.closest("section")?.dataset.graph);
      if (top && wrap.scrollTop !== top) wrap.scrollTop = top;
    }
    this.select(this.ctx.current());
  }

  /** @param {Trace} trace @param {import("../../types/events").MemoryGraph} g */
  heading(trace, g) {
    return h("h3", `${trace.graph("capture", g.id)?.kind ?? "graph"} ${g.id}`,
      h("span.hint", `${plural(g.buffers.length, "buffer")} over ${plural(g.steps.length, "kernel")}`));
  }

  /** @param {Trace} trace @param {import("../../types/events").MemoryGraph} g */
  section(trace, g) {
    return h("section", { dataset: { graph: g.id } }, this.heading(trace, g),
      this.peaks(g), this.saved(g), this.chart(g),
      h("details.plan", h("summary", "Allocation plan"),
        h("pre.code-plain", (g.lines ?? []).join("\n"))));
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
        growing(h("tbody"), g.saved, (s) => {
          const tr = h("tr", { dataset: { saved: s.node } }, h("td.mono", s.node),
            h("td.mono", s.buffer ?? "graph input (no new memory)"),
            h("td.num", s.bytes != null ? fmtBytes(s.bytes) : "–"), h("td.mono", s.backward_input ?? "–"));
          if (s.buffer) {
            tr.addEventListener("mouseenter", () => this.ctx.hover(fromBuffer(this.ctx.index(), g.id, s.buffer)));
            tr.addEventListener("mouseleave", () => this.ctx.unhover());
          }
          return tr;
        }, (left) => h("tr.more", h("td", { colspan: 4 }, `${left} more rows…`)))));
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

  // Where everything of graph `g`'s chart goes: every kernel's column in the pane's width
  // (the chart is its own overview), narrower columns down to MIN_COL_W, and only then a
  // horizontal scroll; a row per buffer, the live bytes under them.
  /** @param {import("../../types/events").MemoryGraph} g */
  geometry(g) {
    const lastStep = Math.max(g.steps.length - 1, 0);
    const span = (b) => [Math.min(b.first, lastStep), Math.min(Math.max(b.last, b.first), lastStep)];
    const room = (this.width || this.el.clientWidth || 800) - LABEL_W - 110;
    const colW = Math.max(MIN_COL_W, Math.min(MAX_COL_W, Math.floor(room / Math.max(g.steps.length, 1))));
    const liveTop = g.buffers.length * ROW_H + 14;
    return { span, colW, liveTop, width: LABEL_W + g.steps.length * colW + 80,
      height: liveTop + 64, x: (step) => LABEL_W + step * colW, slot: this.slots(g) };
  }

  /** @param {import("../../types/events").MemoryGraph} g */
  chart(g) {
    const at = this.geometry(g);
    const { width, height, x, colW } = at;
    // Each kernel's name and colour in the head, which stays in view as the rows scroll
    // under it; below, its column (hover: the kernel) is found from the pointer's x.
    const head = h("svg.lifetimes-head", { width, height: HEAD_H, viewBox: `0 0 ${width} ${HEAD_H}` },
      g.steps.map((name, s) => this.columnHead(g.id, name, x(s), colW)));
    const rows = h("g.rows");
    const body = h("svg.lifetimes", { width, height, viewBox: `0 0 ${width} ${height}` },
      this.columns(g, at), rows, this.links(g, at),
      h("text.row-label", { x: 8, y: at.liveTop + 30 }, "live bytes"), this.liveBars(g, at));
    const wrap = h("div.chart-wrap", h("div.chart-head", head), body);
    this.lazyRows(g, wrap, rows, this.rowMaker(g, at));
    return wrap;
  }

  // A model's buffers are hundreds of rows: those in the wrap's view (and ROWS_NEAR px
  // around it) are drawn, the rest as they scroll near, or when a selection marks them.
  lazyRows(g, wrap, rows, row) {
    const drawn = new Set();
    const draw = (i) => {
      if (drawn.has(i)) return;
      drawn.add(i);
      rows.append(row(i));
    };
    const fill = () => {
      const view = wrap.clientHeight || window.innerHeight * 0.7;
      const from = Math.max(0, Math.floor((wrap.scrollTop - HEAD_H - ROWS_NEAR) / ROW_H));
      const to = Math.min(g.buffers.length, Math.ceil((wrap.scrollTop + view + ROWS_NEAR) / ROW_H));
      for (let i = from; i < to; i++) draw(i);
    };
    wrap.addEventListener("scroll", () => {
      this.scrolled.set(String(g.id), wrap.scrollTop);
      fill();
    }, { passive: true });
    fill();
    g.buffers.forEach((b, i) => this.rows.set(`${g.id}:${b.name}`, () => draw(i)));
  }

  // One rect under the rows: the column under the pointer is marked and its kernel hovered.
  columns(g, { x, colW, liveTop }) {
    const mark = h("rect.col-hl", { x: 0, y: 0, width: colW, height: liveTop - 6, visibility: "hidden" });
    let current = -1;
    const area = h("rect.cols", { x: x(0), y: 0, width: g.steps.length * colW, height: liveTop - 6 });
    const group = h("g.columns", area, mark);
    group.addEventListener("mousemove", (e) => {
      const box = area.getBoundingClientRect();
      const s = Math.floor(((e.clientX - box.left) / box.width) * g.steps.length);
      if (s === current || s < 0 || s >= g.steps.length) return;
      current = s;
      mark.setAttribute("x", String(x(s)));
      mark.setAttribute("visibility", "visible");
      this.ctx.hover(fromKernel(this.ctx.index(), g.id, g.steps[s]));
    });
    group.addEventListener("mouseleave", () => {
      current = -1;
      mark.setAttribute("visibility", "hidden");
      this.ctx.unhover();
    });
    return group;
  }

  links(g, { x, span }) {
    return g.buffers.filter((b) => b.reused_from).map((b) => {
      const j = g.buffers.findIndex((o) => o.name === b.reused_from);
      if (j < 0) return null;
      const from = g.buffers[j];
      const x1 = x(span(from)[1] + 1) - 4, y1 = j * ROW_H + ROW_H / 2;
      const x2 = x(span(b)[0]) + 4, y2 = g.buffers.indexOf(b) * ROW_H + ROW_H / 2;
      return h("g.reuse", h("title", `${b.name} reuses ${from.name}'s storage`),
        h("path", { d: `M${x1},${y1} C${x1 + 24},${y1} ${x2 - 24},${y2} ${x2},${y2}` }),
        h("text", { x: (x1 + x2) / 2 + 4, y: (y1 + y2) / 2 - 3 }, "reuse"));
    });
  }

  liveBars(g, { x, span, colW, liveTop }) {
    const live = g.steps.map((_, s) => g.buffers
      .filter((b) => span(b)[0] <= s && s <= span(b)[1]).reduce((n, b) => n + b.bytes, 0));
    const maxLive = Math.max(...live, 1);
    return live.map((bytes, s) => {
      const hgt = (40 * bytes) / maxLive;
      return h("g.live", h("title", `${fmtBytes(bytes)} live during ${g.steps[s]}`),
        h("rect", { x: x(s) + colW / 7, y: liveTop + 44 - hgt, width: colW * 5 / 7, height: hgt, rx: 2 }),
        colW >= MAX_COL_W / 1.3 ? h("text", { x: x(s) + colW / 2, y: liveTop + 58, "text-anchor": "middle" }, fmtBytes(bytes)) : null);
    });
  }

  columnHead(gid, name, left, colW) {
    const el = h("g.step", h("title", name),
      h("rect.col", { x: left, y: 0, width: colW, height: HEAD_H }),
      h("rect.kswatch", { x: left + colW / 12, y: HEAD_H - 14, width: colW * 5 / 6, height: 5, rx: 2,
        style: `fill: ${this.ctx.kernelColour(gid, name)}` }),
      colW >= LABELLED_COL_W ? h("text.step-label", { transform: `translate(${left + colW / 2 - 4},${HEAD_H - 20}) rotate(-35)` },
        name.length > 20 ? `${name.slice(0, 19)}…` : name) : null);
    el.addEventListener("mouseenter", () => this.ctx.hover(fromKernel(this.ctx.index(), gid, name)));
    el.addEventListener("mouseleave", () => this.ctx.unhover());
    return el;
  }

  // Row `i` of graph `g`'s chart: one buffer's bar, with its selection wired.
  rowMaker(g, { slot, span, x, colW }) {
    const saved = new Set((g.saved ?? []).map((s) => s.buffer).filter(Boolean));
    // Buffers a collective holds until its wait_tensor (its input, its result).
    const held = new Map((g.holds ?? []).map((hd) => [hd.buffer, hd]));
    const inset = Math.min(4, colW / 4);
    return (i) => {
      const b = g.buffers[i];
      const [first, last] = span(b);
      const y = i * ROW_H;
      const hue = SLOT_HUES[slot.get(b.name) % SLOT_HUES.length];
      const hold = held.get(b.name);
      const bar = h(`g.mbar${saved.has(b.name) ? ".saved" : ""}${hold ? ".held" : ""}`, { dataset: { buffer: b.name } },
        h("title", `${b.name}: ${fmtBytes(b.bytes)}, live ${g.steps[first]} → ${g.steps[last]}` +
          `${b.reused_from ? `, reuses ${b.reused_from}'s storage` : ""}${b.output ? ", graph output" : ""}` +
          `${hold ? `, held by ${hold.collective} (its ${hold.why}) until ${hold.wait || "the graph returns"}` : ""}`),
        h("text.row-label", { x: 8, y: y + 15 }, b.name,
          saved.has(b.name) ? " (saved)" : hold ? " (held)" : b.output ? " (out)" : ""),
        h("rect", { x: x(first) + inset, y: y + 3, width: Math.max(2, (last - first + 1) * colW - 2 * inset),
          height: ROW_H - 6, rx: 4, style: `fill: hsl(${hue} 60% 45%); stroke: hsl(${hue} 70% 65%)` }),
        h("text.bytes", { x: x(last + 1) + 6, y: y + 15 }, fmtBytes(b.bytes)));
      bar.addEventListener("mouseenter", () => this.ctx.hover(fromBuffer(this.ctx.index(), g.id, b.name)));
      bar.addEventListener("mouseleave", () => this.ctx.unhover());
      bar.addEventListener("click", () => this.ctx.pin(fromBuffer(this.ctx.index(), g.id, b.name)));
      const key = `${g.id}:${b.name}`;
      this.bars.set(key, bar);
      bar.classList.toggle("hl", this.marked.has(key));
      return bar;
    };
  }

  // A new width (a resize, a maximised column) fits the columns again.
  shown() {
    if (this.trace && Math.abs(this.el.clientWidth - this.width) > 40) this.render(this.trace);
  }

  // Selected buffers' rows are drawn (if they were not yet) and marked.
  select(sel) {
    this.marked = new Set(sel.buffers);
    for (const key of this.marked) this.rows.get(key)?.();
    for (const [key, bar] of this.bars) bar.classList.toggle("hl", this.marked.has(key));
  }
}
