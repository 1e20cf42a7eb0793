// Diff pane: two traces side by side (two option sets of one snippet, two snippets, or
// ours against Inductor's own output code). Totals, the options and code that differ, a
// kernel-level match-up with each pair's time and its delta, and for every pair a
// side-by-side line diff of the two sources. `show(left, right)` takes two sides:
// {label, href, trace, kernels} (kernels from diff.js: oursKernels / inductorKernels).

import { h, clear, badge, fmtMs } from "../dom.js";
import { PARTIAL, groupTimes, lineDiff, matchKernels, optionChanges, sideBySide, structure } from "../diff.js";
import { inductorOf } from "../trace.js";
import { changeClass, fmtSpread } from "../spread.js";
import { compareSection } from "./compare.js";
import { Pane } from "./pane.js";

export class DiffPane extends Pane {
  id = "diff";
  title = "Diff";
  placeholder = "Pick two traces to compare.";

  constructor(ctx) {
    super(ctx, "div.pane-body.diff-pane");
    this.reset();
  }

  // `groups`: both sides' kernels grouped by the FX nodes they cover (GET /api/diff).
  show(left, right, groups = []) {
    this.rows = matchKernels(left.kernels, right.kernels, groups);
    const sameCode = left.trace.data("source")?.code === right.trace.data("source")?.code;
    if (right.inductor && right.kernels.some((k) => k.origins.length)) {
      return this.showInductor(left, right, groups, inductorOf(right.trace));
    }
    clear(this.el,
      h("div.diff-sides", [left, right].map((s, i) => h("div.diff-side",
        h("span.side-tag", i ? "B" : "A"),
        s.href ? h("a", { href: s.href }, s.label) : h("b", s.label),
        h("span.hint", this.totals(s))))),
      this.changes(left, right, sameCode),
      left.inductor || right.inductor ? null : this.structureTable(left.trace, right.trace),
      this.groupTable(groups, left.kernels, right.kernels),
      h("h3", "Kernels, matched", h("span.hint", "time is the measured median per call; Δ is B − A, " +
        "coloured only where B's p10–p90 lies outside A's")),
      this.table(),
      sameCode ? null : this.codeDiff("Snippet", left.trace.data("source")?.code,
        right.trace.data("source")?.code, "python"),
      this.rows.filter((r) => r.a?.source || r.b?.source).map((r) => this.codeDiff(
        `${r.a?.name ?? "—"} ↔ ${r.b?.name ?? "—"}`, r.a?.source, r.b?.source,
        r.a?.language ?? r.b?.language)));
    this.setFilled(true);
  }

  // Ours against Inductor where the `inductor` event matched the kernels by FX nodes:
  // the groups side by side, each with both compilers' code, then Inductor's modules.
  showInductor(left, right, groups, ind) {
    clear(this.el,
      h("div.diff-sides", [left, right].map((s, i) => h("div.diff-side",
        h("span.side-tag", i ? "B" : "A"),
        s.href ? h("a", { href: s.href }, s.label) : h("b", s.label),
        h("span.hint", this.totals(s))))),
      this.changes(left, right, true),
      compareSection(groups, left.kernels, ind, right.trace),
      (ind.code ?? []).map((text, i) => h("details.code-diff.inductor-module",
        h("summary", h("code", `Inductor's output module ${i + 1}`),
          h("span.hint", "the wrapper and its kernels, as Inductor wrote them")),
        h("pre.compare-source", text))));
    this.setFilled(true);
  }

  totals(side) {
    const p = side.trace.data("profile");
    if (side.inductor) {
      const ms = inductorOf(side.trace)?.inductor_ms;
      return ms ? `Inductor ${fmtMs(ms)} per call` : "Inductor: not timed";
    }
    if (!p) return side.trace.error ? `failed in ${side.trace.error.stage ?? "?"}` : "no profile";
    if (!p.measured) return `not timed: ${p.reason ?? ""}`;
    return `${fmtSpread(p.kernelscope_time ?? { ms: p.kernelscope_ms })} per call · ` +
      `eager ${fmtSpread(p.eager_time ?? { ms: p.eager_ms })}`;
  }

  changes(left, right, sameCode) {
    const items = [];
    if (!left.inductor && !right.inductor) {
      for (const c of optionChanges(left.trace, right.trace)) {
        items.push(h("li", h("code", c.name), ` ${JSON.stringify(c.a)} → ${JSON.stringify(c.b)}`));
      }
    }
    items.push(h("li", sameCode ? "same snippet" : "different snippets (diff below)"));
    if (left.inductor || right.inductor) items.push(h("li", "B is TorchInductor's own output code for the same snippet"));
    return h("ul.diff-changes", items);
  }

  table() {
    const row = (r) => {
      // A kernel that shares only some FX nodes with its match is one part of a fused
      // group: its time against the other's is no delta (the group's row has it).
      const partial = r.how === PARTIAL;
      const delta = !partial && r.a?.ms != null && r.b?.ms != null ? r.b.ms - r.a.ms : null;
      const pct = delta !== null && r.a.ms ? (100 * delta) / r.a.ms : null;
      // Coloured only when B's spread lies outside A's (spread.js changeClass).
      const change = delta === null ? "" : changeClass(r.a?.time, r.b?.time);
      const cls = change ? `.${change}` : "";
      return h("tr", { dataset: { a: r.a?.name ?? "", b: r.b?.name ?? "", change } },
        h("td", r.a ? h("code", r.a.name) : h("span.hint", "no match")),
        h("td", r.b ? h("code", r.b.name) : h("span.hint", "no match")),
        h("td", r.how ? badge(r.how) : ""),
        h("td.num", fmtMs(r.a?.ms)), h("td.num", fmtMs(r.b?.ms)),
        h(`td.num.delta${cls}`, partial ? h("span.hint", "see fused groups") : delta === null ? "–"
          : `${delta > 0 ? "+" : delta < 0 ? "−" : ""}${fmtMs(Math.abs(delta))}` +
            (pct !== null ? ` (${pct > 0 ? "+" : ""}${pct.toFixed(0)}%)` : "")));
    };
    return h("table.grid.diff-kernels",
      h("thead", h("tr", ["A kernel", "B kernel", "matched by", "A time", "B time", "Δ"].map((c) => h("th", c)))),
      h("tbody", this.rows.map(row)));
  }

  structureTable(ta, tb) {
    const rows = structure(ta, tb).filter((r) => r.a !== null || r.b !== null);
    const fmt = (x) => (x === null ? "–" : String(x));
    return h("section.diff-structure", h("h3", "Structure", h("span.hint", "graphs, fusion, buffer plan")),
      h("table.grid.diff-structure-table",
        h("thead", h("tr", ["", "A", "B", "Δ"].map((c) => h("th", c)))),
        h("tbody", rows.map((r) => h("tr", { dataset: { what: r.what }, class: r.a !== r.b ? "changed" : null },
          h("td", r.what), h("td.num", fmt(r.a)), h("td.num", fmt(r.b)),
          h("td.num", r.a !== null && r.b !== null && r.a !== r.b
            ? `${r.b > r.a ? "+" : "−"}${Math.abs(r.b - r.a)}` : ""))))));
  }

  // One row per group of kernels fusing the same FX nodes: a fused kernel against the
  // kernels it replaced, timed as a set.
  groupTable(groups, as = [], bs = []) {
    const names = (ks) => ks.length ? ks.map((k) => h("div", h("code", k)))
      : h("span.hint", "none");
    const row = (g) => {
      const { timeA, timeB } = groupTimes(g, as, bs);
      const delta = g.a_ms != null && g.b_ms != null ? g.b_ms - g.a_ms : null;
      const pct = delta !== null && g.a_ms ? (100 * delta) / g.a_ms : null;
      const change = delta === null ? "" : changeClass(timeA, timeB);
      const cls = change ? `.${change}` : "";
      return h("tr", { dataset: { nodes: g.nodes.join(","), a: g.a.length, b: g.b.length, how: g.how, change } },
        h("td.wrap", g.nodes.length ? g.nodes.join(", ") : h("span.hint", "no FX nodes")),
        h("td", names(g.a)), h("td", names(g.b)),
        h("td.num", fmtMs(g.a_ms)), h("td.num", fmtMs(g.b_ms)),
        h(`td.num.delta${cls}`, delta === null ? "–"
          : `${delta > 0 ? "+" : delta < 0 ? "−" : ""}${fmtMs(Math.abs(delta))}` +
            (pct !== null ? ` (${pct > 0 ? "+" : ""}${pct.toFixed(0)}%)` : "")));
    };
    return h("section.diff-groups",
      h("h3", "Fused groups", h("span.hint", "kernels matched by the FX nodes they fuse; time summed per side")),
      h("table.grid.diff-group-table",
        h("thead", h("tr", ["FX nodes", "A kernels", "B kernels", "A time", "B time", "Δ"].map((c) => h("th", c)))),
        h("tbody", groups.map(row))));
  }

  codeDiff(title, left, right, language) {
    const rows = sideBySide(lineDiff(left, right));
    const changed = rows.filter((r) => r.left?.op !== "same").length;
    const cell = (x, side) => x
      ? [h(`td.ln`, String(x[side] ?? "")), h(`td.dt.${x.op}`, x.text || " ")]
      : [h("td.ln"), h("td.dt.gap", " ")];
    return h("details.code-diff", { open: changed > 0 && changed < 400, dataset: { language: language ?? "" } },
      h("summary", h("code", title), h("span.hint", changed ? `${changed} changed lines` : "identical")),
      h("div.diff-scroll", h("table.diff-lines", h("tbody", rows.map((r) =>
        h("tr", cell(r.left, "a"), cell(r.right, "b")))))));
  }
}
