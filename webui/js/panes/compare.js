// Ours against Inductor, structurally: the groups of the `inductor` event (our kernels and
// Inductor's calls that cover the same FX nodes, matched in compiler/compare/match.py),
// each with both sides' kernels, bytes and time side by side, and under it both compilers'
// own code, kernel by kernel (Inductor's extern calls have none: the call is named).
// Pure rendering of event data; the matching is never redone here.

import { h, badge, fmtBytes, fmtMs, plural } from "../dom.js";
import { groupTimes, inductorKernels } from "../diff.js";
import { changeClass } from "../spread.js";

// The relation as the page says it, side A being ours and B Inductor.
const HOW = {
  "same FX nodes": "same FX nodes", "A fuses more": "ours fuses more",
  "B fuses more": "Inductor fuses more", regrouped: "regrouped",
  "only A": "only ours", "only B": "only Inductor",
};

/** One row per group and its code; `ours`: our kernels (diff.js oursKernels);
 * `inductor`: the `inductor` event; `trace`: the trace it is in. */
export function compareSection(groups, ours, inductor, trace) {
  const calls = inductorKernels(trace);
  const mine = new Map(ours.map((k) => [`${k.gid}:${k.name}`, k]));
  const theirs = new Map(calls.map((k) => [`${k.gid}:${k.call || k.name}`, k]));
  const counts = {};
  for (const g of groups) counts[g.how] = (counts[g.how] ?? 0) + 1;
  const where = graphPlaces(trace);
  return h("section.compare",
    h("h3", "Kernels by the FX nodes they cover",
      h("span.hint", `${plural(groups.length, "group")}: ` +
        Object.entries(counts).map(([how, n]) => `${n} ${HOW[how] ?? how}`).join(", "))),
    h("table.grid.compare-table",
      h("thead", h("tr", ["graph", "FX nodes", "lines", "ours", "Inductor", "", "ours bytes",
        "Inductor bytes", "ours time", "Inductor time", "Δ"].map((c) => h("th", c)))),
      h("tbody", groups.map((g, i) => groupRow(g, i, groupTimes(g, ours, calls), where)))),
    groups.map((g, i) => groupCode(g, i, g.a.map((n) => mine.get(`${g.graph}:${n}`) ?? { name: n }),
      g.b.map((c) => theirs.get(`${g.graph}:${c}`) ?? { name: c, call: c }))));
}

// Each captured graph's label (its Dynamo compile id and kind) and its nodes' user lines.
function graphPlaces(trace) {
  const graphs = new Map(trace.graphs("capture").map((g) => [g.id, g]));
  const lineOf = new Map([...graphs.values()].flatMap((g) =>
    (g.nodes ?? []).map((n) => [`${g.id}:${n.name}`, n.line])));
  return {
    label: (id) => {
      const g = graphs.get(id);
      return g ? [g.compile_id, g.kind].filter(Boolean).join(" ") || `graph ${id}` : `graph ${id ?? "?"}`;
    },
    lines: (g) => [...new Set(g.nodes.map((n) => lineOf.get(`${g.graph}:${n}`))
      .filter((x) => x != null))].sort((a, b) => a - b),
  };
}

// A change is coloured only where both sides' spreads say so (spread.js changeClass).
function groupRow(g, i, { timeA, timeB }, where) {
  const lines = where.lines(g);
  const names = (xs) => (xs.length ? xs.map((x) => h("div", h("code", x))) : h("span.hint", "none"));
  const delta = g.a_ms != null && g.b_ms != null ? g.b_ms - g.a_ms : null;
  const change = delta === null ? "" : changeClass(timeA, timeB);
  const cls = change ? `.${change}` : "";
  return h("tr", { dataset: { group: String(i), how: g.how, a: g.a.join(","), b: g.b.join(",") } },
    h("td", where.label(g.graph)),
    h("td.wrap", g.nodes.length ? g.nodes.join(", ") : h("span.hint", "no FX nodes")),
    h("td", lines.length ? lines.join(", ") : "–"),
    h("td", names(g.a)), h("td", names(g.b)),
    h("td", h("a", { href: `#compare-group-${i}` }, badge(HOW[g.how] ?? g.how))),
    h("td.num", g.a_bytes != null ? fmtBytes(g.a_bytes) : "–"),
    h("td.num", g.b_bytes != null ? fmtBytes(g.b_bytes) : "–"),
    h("td.num", fmtMs(g.a_ms)), h("td.num", fmtMs(g.b_ms)),
    h(`td.num.delta${cls}`, delta === null ? "–"
      : `${delta > 0 ? "+" : delta < 0 ? "−" : ""}${fmtMs(Math.abs(delta))}`));
}

// Both sides' code for one group, side by side: ours left, Inductor's right.
function groupCode(g, i, as, bs) {
  const code = (k, side) => h("div.compare-kernel", { dataset: { side, kernel: k.call || k.name } },
    h("div.compare-kernel-head", h("code", k.name),
      k.kind === "extern" ? badge("extern call") : null,
      k.bytes != null ? h("span.hint", fmtBytes(k.bytes)) : null,
      k.ms != null ? h("span.hint", fmtMs(k.ms)) : null),
    k.source ? h("pre.compare-source", k.source)
      : h("div.hint", k.kind === "extern" ? "a library call: Inductor generates no code for it"
        : "no source in this trace"));
  return h("details.compare-code", { id: `compare-group-${i}`, open: i === 0 },
    h("summary", h("code", g.nodes.slice(0, 6).join(", ") + (g.nodes.length > 6 ? ", …" : "")),
      h("span.hint", `${g.a.length} ours · ${g.b.length} Inductor's`)),
    h("div.compare-sides",
      h("div.compare-side", as.length ? as.map((k) => code(k, "a")) : h("div.hint", "no kernel of ours")),
      h("div.compare-side", bs.length ? bs.map((k) => code(k, "b")) : h("div.hint", "no kernel of Inductor's"))));
}
