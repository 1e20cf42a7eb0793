// The profile's rows in the Timings pane: where every microsecond of a call goes (ours or
// eager: kernels, extern calls, the wrapper, the unaccounted rest), sortable and searchable,
// opening on the hottest rows; the rollups by module and by graph; ours against eager by
// FX node; the measured peak memory; the conditions of the timing; the Chrome trace export.

import { h, badge, fmtMs, fmtBytes, shape } from "../dom.js";
import { fmtSpread, shortSpread, sortRows, sumSpread, changeClass, chromeTrace } from "../spread.js";
import { reproducer } from "../repro.js";

/** @typedef {import("../../types/events").Profile} Profile */
/** @typedef {import("../../types/events").RowSet} RowSet */

export const TOP_N = 25;

// How the figures were taken: "1 thread pinned to CPU 0 · load 1.2 → 1.3 · timing slot: held".
/** @param {Profile} p */
export function conditions(p) {
  const c = p.conditions;
  if (!c) return null;
  const parts = [];
  if (c.threads != null) {
    parts.push(`${c.threads} thread${c.threads === 1 ? "" : "s"}` +
      (c.cpus?.length ? ` pinned to CPU ${c.cpus.join(", ")}` : ""));
  }
  if (c.load_before?.length) {
    parts.push(`host load ${c.load_before[0]}` +
      (c.load_after?.length ? ` → ${c.load_after[0]}` : "") + " (1 min)");
  }
  if (c.slot) parts.push(`timing slot: ${c.slot}`);
  if (c.clock) parts.push(`clock: ${c.clock}`);
  return h("p.note.conditions", { title: "set the thread count with the `threads` option" },
    parts.join(" · "));
}

/** @param {Profile} p @param {any} inductor */
export function peakMemory(p, inductor) {
  const m = p.memory;
  if (!m) return null;
  const items = [["Kernelscope", m.kernelscope], ["eager", m.eager], ["plan", m.plan],
    ["Inductor", inductor?.peak_bytes ?? m.inductor]].filter(([, v]) => v != null);
  return h("p.note.peak-memory", { title: m.method },
    h("b", "Peak memory "), items.map(([k, v]) => `${k} ${fmtBytes(v)}`).join(" · "),
    h("span.hint", " (allocator high-water mark of one call; plan: the memory plan's peak)"));
}

// A download link whose file is made when it is clicked.
function download(cls, name, label, title, make, type) {
  const a = h(`a.${cls}`, { href: "#", download: name, title }, label);
  a.addEventListener("click", () => { a.href = URL.createObjectURL(new Blob([make()], { type })); });
  return a;
}

// Export: the profile as a Chrome/Perfetto trace, and each captured graph as a script.
/** @param {Profile} p @param {any[]} graphs the capture event's graphs @param {any} source */
export function exportLinks(p, graphs, source) {
  return h("p.note.exports", "Export: ",
    download("export-trace", "kernelscope-profile.trace.json", "Chrome/Perfetto trace (.json)",
      "open in ui.perfetto.dev or chrome://tracing", () => JSON.stringify(chromeTrace(p)),
      "application/json"),
    graphs.length ? " · reproducer: " : "",
    graphs.map((g, i) => [i ? ", " : "", download("export-repro", `repro_graph${g.id}.py`,
      `graph ${g.id}${g.kind ? ` (${g.kind})` : ""} (.py)`,
      "its ATen graph, inputs of its shapes, our compiled call beside eager",
      () => reproducer(g, source), "text/x-python")]));
}

// The rows of one side with their coverage line, a search box and sortable headers.
export class RowsView {
  /** @param {Profile} p @param {(row: any) => void} [hover] @param {() => void} [unhover] */
  constructor(p, hover, unhover) {
    this.p = p;
    this.side = p.ours ? "ours" : "eager";
    this.key = "ms";
    this.desc = true;
    this.query = "";
    this.all = false;
    this.hover = hover;
    this.unhover = unhover;
    this.el = h("section.profile-rows");
    this.render();
  }

  /** @returns {RowSet | null} */
  rowSet() { return this.p[this.side] ?? null; }

  render() {
    const rs = this.rowSet();
    if (!rs) { this.el.replaceChildren(); return; }
    const search = h("input.row-search", { type: "search", placeholder: "search rows (name, op, module, library)",
      value: this.query });
    search.addEventListener("input", () => { this.query = search.value; this.renderTable(); });
    this.search = search;
    this.el.replaceChildren(
      h("h3", "Where the time goes", h("span.hint", rs.method)),
      h("div.row-tabs", ["ours", "eager"].filter((s) => this.p[s]).map((s) => {
        const b = h(`button.row-tab${s === this.side ? ".active" : ""}`, { dataset: { side: s } },
          s === "ours" ? "Kernelscope" : "eager");
        b.addEventListener("click", () => { this.side = s; this.render(); });
        return b;
      })),
      coverage(rs), search, this.table = h("div.rows-table"));
    this.renderTable();
  }

  renderTable() {
    const rs = this.rowSet();
    const rows = sortRows(rs.rows, this.key, this.desc, this.query);
    const shown = this.all ? rows : rows.slice(0, TOP_N);
    const head = [["name", "row"], ["kind", "kind"], ["op", "op · shapes"], ["library", "library"],
      ["module", "module"], ["ms", "time (median, spread)"], ["ms", "% of call"]];
    const th = ([key, label]) => {
      const el = h("th.sortable", { dataset: { key } }, label,
        this.key === key ? (this.desc ? " ▾" : " ▴") : "");
      el.addEventListener("click", () => {
        this.desc = this.key === key ? !this.desc : key === "ms";
        this.key = key;
        this.renderTable();
      });
      return el;
    };
    const more = rows.length > shown.length
      ? h("button.show-all", `show all ${rows.length} rows`) : null;
    more?.addEventListener("click", () => { this.all = true; this.renderTable(); });
    this.table.replaceChildren(
      h("table.grid.profile-rows-table", h("thead", h("tr", head.map(th))),
        h("tbody", shown.map((r) => this.row(r)))),
      h("p.note", `${shown.length} of ${rows.length} rows` +
        (this.all ? "" : `, hottest first`)), more);
  }

  row(r) {
    const tr = h(`tr.row-${r.kind}`, { dataset: { row: r.name, kind: r.kind, graph: r.graph },
      title: fmtSpread(r.time) },
      h("td", h("code", r.name)),
      h("td.kind", r.covered ? badge(r.kind) : badge("unaccounted", "bad")),
      h("td.wrap", r.op ? h("code", r.op) : "", r.shapes?.length ? ` ${r.shapes.map(shape).join(" ")}` : ""),
      h("td", r.library || ""), h("td", r.module ?? ""),
      h(`td.num${r.time?.noisy ? ".noisy" : ""}`, shortSpread(r.time)),
      h("td.num", r.pct != null ? `${r.pct.toFixed(1)}%` : "–"));
    if (this.hover && r.kind === "kernel") {
      tr.addEventListener("mouseenter", () => this.hover(r));
      tr.addEventListener("mouseleave", () => this.unhover?.());
    }
    return tr;
  }
}

/** @param {RowSet} rs */
function coverage(rs) {
  const rest = rs.rows.find((r) => r.kind === "unaccounted");
  const pct = rs.coverage != null ? `${(100 * rs.coverage).toFixed(1)}%` : "–";
  const low = rs.coverage != null && rs.coverage < 0.95;
  return h(`p.note.coverage${low ? ".low" : ""}`, { dataset: { coverage: rs.coverage ?? "" } },
    h("b", `Rows cover ${pct} `), `of the call timed without timers (${fmtSpread(rs.call)}); `,
    `unaccounted ${fmtMs(rest?.time?.ms ?? 0)}` + (rs.note ? ` · ${rs.note}` : ""));
}

// Rollups: "blocks.3.attn: 0.81 ms, 17%", by module path, by graph, forward against backward.
/** @param {RowSet} rs */
export function rollups(rs) {
  if (!rs?.rollups?.length) return null;
  const table = (by, title, limit) => {
    const items = rs.rollups.filter((r) => r.by === by).slice(0, limit);
    if (!items.length) return null;
    return h("div.rollup", h("h4", title), h("table.grid.rollup-table", { dataset: { by } },
      h("tbody", items.map((r) => h("tr", { dataset: { key: r.key } },
        h("td", h("code", r.key)), h("td.num", fmtMs(r.ms)),
        h("td.num", r.pct != null ? `${r.pct.toFixed(1)}%` : "–"),
        h("td.num.hint", `${r.rows} rows`))))));
  };
  return h("section.rollups", h("h3", "By module and graph", h("span.hint", "the covered rows added up")),
    h("div.rollup-grid", table("graph_kind", "forward / backward", 4), table("graph", "graphs", 12),
      table("module", "modules (a parent holds its children)", 20)));
}

// Ours against eager, group by group of FX nodes: where the compiled call wins and loses.
/** @param {Profile} p */
export function opComparison(p) {
  if (!p.compare?.length || !p.ours || !p.eager) return null;
  const spreadOf = (rs, names, gid) => sumSpread(names.map((n) =>
    rs.rows.find((r) => r.name === n && r.graph === gid)?.time));
  const rows = p.compare.filter((c) => c.ours.length && c.eager.length).slice(0, 40);
  return h("section.op-compare", h("h3", "Ours against eager, by FX node",
    h("span.hint", "coloured only where the two spreads do not overlap")),
  h("table.grid.op-compare-table", h("thead", h("tr", ["module", "Kernelscope rows", "eager ops",
    "Kernelscope", "eager", "×"].map((c) => h("th", c)))),
  h("tbody", rows.map((c) => {
    const a = spreadOf(p.eager, c.eager, c.graph), b = spreadOf(p.ours, c.ours, c.graph);
    const cls = changeClass(a, b);
    const ratio = c.ours_ms && c.eager_ms ? c.eager_ms / c.ours_ms : null;
    return h("tr", { dataset: { nodes: c.nodes.join(",") } },
      h("td", c.module ?? ""), h("td.wrap", c.ours.join(", ")),
      h("td.wrap", { title: c.nodes.join(", ") }, c.eager.length > 4
        ? `${c.eager.slice(0, 4).join(", ")} +${c.eager.length - 4}` : c.eager.join(", ")),
      h("td.num", shortSpread(b)), h("td.num", shortSpread(a)),
      h(`td.num.delta${cls ? `.${cls}` : ""}`, ratio ? `${ratio.toFixed(2)}×` : "–"));
  }))));
}
