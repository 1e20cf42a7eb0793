// Fusion pane: the kernels the scheduler formed (in execution order, with their buffers)
// and every fusion decision it tried, accepted or refused, with its reason and score.

import { h, clear, badge, fmtBytes, plural, growing } from "../dom.js";
import { lineColour, fromBuffer, fromKernel, union } from "../provenance.js";
import { Pane } from "./pane.js";

/** @typedef {import("../trace.js").Trace} Trace */
/** @typedef {import("../../types/events").StageName} StageName */

// Rows of each table drawn with the pane: about a view's height of the first table.
const FIRST_ROWS = 20;

export class FusionPane extends Pane {
  id = "fusion";
  title = "Fusion";
  stages = ["scheduling"];
  placeholder = "Kernels and fusion decisions appear here after scheduling.";

  constructor(ctx) {
    super(ctx, "div.pane-body.fusion-pane");
    this.rows = [];
    this.reset();
  }

  forget() {
    this.rows = [];
  }

  hoverable(row, selectionOf) {
    row.addEventListener("mouseenter", () => this.ctx.hover(selectionOf()));
    row.addEventListener("mouseleave", () => this.ctx.unhover());
    row.addEventListener("click", () => this.ctx.pin(selectionOf()));
    return row;
  }

  /** @param {Trace} trace */
  render(trace) {
    this.rows = [];
    const sections = trace.graphs("scheduling").map((g) => {
      const accepted = g.decisions.filter((d) => d.fused).length;
      return h("section",
        h("h3", `Graph ${g.id} · ${plural(g.kernels.length, "kernel")}`,
          h("span.hint", `${plural(g.decisions.length, "fusion")} tried: ${accepted} accepted, ` +
            `${g.decisions.length - accepted} refused`)),
        h("h4", "Kernels, in execution order"), h("div.table-wrap", this.kernelTable(g)),
        h("h4", "Fusion decisions, in the order tried"), this.decisionTable(g),
        g.removed_buffers?.length
          ? h("p.note", `Never stored (produced and consumed inside one kernel): ${g.removed_buffers.join(", ")}`)
          : null);
    });
    clear(this.el, sections);
    this.select(this.ctx.current());
    return true;
  }

  /** @param {import("../../types/events").SchedulingGraph} g */
  kernelTable(g) {
    const row = (k, i) => {
      const tr = h("tr", { dataset: { kernel: `${g.id}:${k.name}` } },
        h("td.num", i),
        h("td", h("span.chip", { style: { "--kc": this.ctx.kernelColour(g.id, k.name) } }, k.name),
          h("div.origins", `FX: ${k.origins.join(", ")}`)),
        h("td", badge(k.kind, k.kind)),
        h("td.num", k.rnumel > 1 ? `${k.numel} × ${k.rnumel}` : k.numel),
        h("td", k.buffers.join(", ")),
        h("td", k.lines.map((l) => h("span.line-chip", { style: { "--pc": lineColour(l) } }, l))));
      this.rows.push({ tr, kernel: `${g.id}:${k.name}` });
      return this.hoverable(tr, () => fromKernel(this.ctx.index(), g.id, k.name));
    };
    return h("table.grid",
      h("thead", h("tr", ["#", "kernel (FX nodes)", "kind", "numel", "buffers", "lines"]
        .map((c) => h("th", c)))),
      this.tbody(g.kernels.map((k, i) => [k, i]), ([k, i]) => row(k, i), 6));
  }

  // A model's tables have hundreds of rows: drawn in chunks as they are scrolled to, the
  // first FIRST_ROWS at once (none for a folded group, until it is opened).
  tbody(items, make, columns, first = FIRST_ROWS) {
    return growing(h("tbody"), items, make,
      (left) => h("tr.more", h("td", { colspan: columns }, `${left} more rows…`)),
      { first, drawn: () => this.select(this.ctx.current()) });
  }

  /** @param {import("../../types/events").SchedulingGraph} g */
  decisionTable(g) {
    if (!g.decisions.length) return h("p.note", "No fusion was tried.");
    const numbered = g.decisions.map((d, i) => ({ d, n: i + 1 }));
    const accepted = numbered.filter(({ d }) => d.fused);
    const groups = refusalGroups(numbered.filter(({ d }) => !d.fused));
    return h("div.decisions",
      accepted.length
        ? h("div.table-wrap", this.decisionRows(g, accepted, "table.grid.decisions")) : null,
      groups.map(({ reason, quiet, items }) => h(`details.refusals${quiet ? ".quiet" : ""}`,
        { open: !quiet, dataset: { count: items.length } },
        h("summary", badge(`${items.length} refused`, "bad"), " ", reason,
          quiet ? h("span.hint", " · folded: nothing to fuse into") : null),
        this.decisionRows(g, items, "table.grid.decisions", quiet ? 0 : FIRST_ROWS))));
  }

  /** @param {import("../../types/events").SchedulingGraph} g @param {{ d: import("../../types/events").FusionDecision, n: number }[]} items @param {string} tag */
  decisionRows(g, items, tag, first = FIRST_ROWS) {
    const row = ({ d, n }) => {
      const tr = h(`tr.${d.fused ? "accepted" : "refused"}`,
        h("td.num", n),
        h("td", h("code", d.node1), " + ", h("code", d.node2)),
        h("td.kind", d.kind ?? ""),
        h("td", d.fused ? badge("fused", "ok") : badge("refused", "bad")),
        h("td.wrap", d.reason ?? ""),
        h("td.num", d.score === null || d.score === undefined ? "–" : fmtBytes(d.score)));
      this.rows.push({ tr, buffers: [`${g.id}:${d.node1}`, `${g.id}:${d.node2}`] });
      return this.hoverable(tr, () => union(fromBuffer(this.ctx.index(), g.id, d.node1),
        fromBuffer(this.ctx.index(), g.id, d.node2)));
    };
    return h(tag,
      h("thead", h("tr", ["#", "pair", "kind", "result", "reason", "saves"]
        .map((c) => h("th", c)))),
      this.tbody(items, row, 6, first));
  }

  select(sel) {
    for (const row of this.rows) {
      const on = row.kernel ? sel.kernels.has(row.kernel)
        : row.buffers.some((b) => sel.buffers.has(b));
      row.tr.classList.toggle("hl", on);
    }
  }
}

// Refusals that say nothing about our fusion rules: an ATen call has no kernel of ours to
// fuse into. Their groups start folded.
const QUIET = [/is an extern call/];

// A refusal's reason with its buffers, numbers and index expressions taken out: the
// reasons of one rule read the same ("… is an extern call", "different sizes: N vs N").
export function reasonClass(reason) {
  return (reason ?? "no reason given")
    .replace(/\([^)]*\)?/g, "")
    .replace(/\bbuf\d+(\+buf\d+)*/g, "…")
    .replace(/\b\d+\b/g, "N")
    .replace(/\s+/g, " ").trim();
}

// Refused decisions grouped by reason class, the largest group first, quiet ones last.
export function refusalGroups(items) {
  const groups = new Map();
  for (const item of items) {
    const reason = reasonClass(item.d.reason);
    if (!groups.has(reason)) groups.set(reason, []);
    groups.get(reason).push(item);
  }
  return [...groups].map(([reason, list]) => ({
    reason, items: list, quiet: QUIET.some((re) => re.test(reason)),
  })).sort((a, b) => (Number(a.quiet) - Number(b.quiet)) || (b.items.length - a.items.length));
}
