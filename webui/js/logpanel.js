// A trace opened from a TORCH_TRACE log of stock Inductor (compiler/trace/torch_trace_events.py):
// where it came from, what a log does not hold (named, never made up), and each compile id
// with its recompile reasons, cache hits and misses, compile-time metrics and every other
// record of the log, an unknown one with its text; and each logged graph (AOT forward,
// backward or inference) with whether Kernelscope can rebuild it (`capture.log.rebuild`,
// decided in compiler/trace/rebuild.py) and, where it can, the button that compiles it as a
// snippet job (`onRebuild(graphId)`). Pure rendering of `capture.log`, `capture.compiles` and
// `capture.graphs`.

import { h, plural } from "./dom.js";

const METRICS = [["entire_frame_compile_time_s", "frame"], ["backend_compile_time_s", "backend"],
  ["inductor_compile_time_s", "Inductor"], ["code_gen_time_s", "codegen"]];

/** @param {any} capture the `capture` event's data
 * @param {((graph: number) => void) | null} onRebuild compiles a logged graph with Kernelscope */
export function logSection(capture, onRebuild = null) {
  const log = capture?.log;
  if (!log) return null;
  const compiles = capture.compiles ?? [];
  return h("div.log-panel", { dataset: { format: log.format } },
    h("div.run-head", h("span.run-tag", "TORCH_TRACE log"),
      h("span.run-summary", `${plural(compiles.length, "compile id")} · ` +
        `${plural(compiles.filter((c) => c.recompile).length, "recompile")} · ` +
        `${plural(log.records, "record")} of torch ${log.torch || "?"} from `, h("code", log.file))),
    h("div.log-absent", "Not in a TORCH_TRACE log, so not shown (never made up): ",
      log.absent.join("; ")),
    h("details.run-compiles.log-compiles", h("summary", "each compile id"),
      h("table",
        h("tr", ["compile", "frame", "recompile reasons", "cache", "compile time", "other records"]
          .map((c) => h("th", c))),
        compiles.map(compileRow))),
    rebuildSection(capture, onRebuild),
    (log.unknown ?? []).length ? records("records of no compile id", log.unknown) : null);
}

// How many logged graphs Kernelscope can rebuild, why not the others, and a button for each
// one it can: the graph compiled by Kernelscope on inputs of its logged shapes and dtypes.
function rebuildSection(capture, onRebuild) {
  const verdicts = new Map((capture.log.rebuild ?? []).map((r) => [r.graph, r]));
  const graphs = capture.graphs ?? [];
  const able = graphs.filter((g) => verdicts.has(g.id) && !verdicts.get(g.id).why_not);
  return h("details.log-rebuild", { open: true },
    h("summary", `${able.length} of ${plural(graphs.length, "logged graph")} rebuildable by ` +
      "Kernelscope", h("span.hint", " (static shapes, ATen ops: compiled by Kernelscope on " +
      "inputs of the logged shapes and dtypes, then compared with Inductor's kernels for it)")),
    h("table",
      h("tr", ["graph", "nodes", "Kernelscope"].map((c) => h("th", c))),
      graphs.map((g) => {
        const v = verdicts.get(g.id);
        const why = v ? v.why_not : "reopen the log: this trace predates rebuilds";
        return h("tr", { dataset: { graph: String(g.id) } },
          h("td", h("code", g.name)),
          h("td.num", String((g.nodes ?? []).filter((n) => n.op === "call_function").length)),
          h("td.wrap", why ? h("span.hint.rebuild-why", `not rebuildable: ${why}`)
            : h("button.rebuild", { type: "button", disabled: !onRebuild,
              title: "Compile this graph with Kernelscope: our IR, fusion decisions and buffer " +
                "plan, then a comparison with Inductor's kernels for it",
              onclick: () => onRebuild?.(g.id) }, "Rebuild with Kernelscope")));
      })));
}

function compileRow(c) {
  const m = c.metrics ?? {};
  const times = METRICS.filter(([k]) => typeof m[k] === "number")
    .map(([k, label]) => `${label} ${m[k].toFixed(2)} s`).join(", ");
  return h("tr", { dataset: { compile: c.compile_id } },
    h("td", h("code", c.compile_id)),
    h("td", `${c.function || "?"}:${c.line ?? "?"}`),
    h("td.wrap", c.reasons?.length ? c.reasons.map((r) => h("div", r)) : "–"),
    h("td", (c.cache ?? []).join(", ") || "–"),
    h("td", times || "–"),
    h("td", c.part ? h("span.hint.log-later", `${c.lengths?.records ?? 0} records, with its ` +
      "graphs (shown when one of them is)")  // a big log's compile: in its part
      : (c.records ?? []).length ? records(`${c.records.length}`, c.records) : "–"));
}

// Records listed by name; one with its text kept (the Dynamo and post-grad graphs, and
// every unknown record) opens to it.
function records(title, list) {
  const unknown = list.filter((r) => !r.known).length;
  return h("details.log-records", h("summary", title + (unknown ? ` (${unknown} unknown)` : "")),
    list.map((r) => r.known && !r.payload ? h("div.hint", `${r.name} · ${r.chars} chars`)
      : h(r.known ? "details.log-text" : "details.log-unknown", { dataset: { record: r.name } },
        h("summary", r.known ? null : h("b", "unknown: "), h("code", r.name), ` · ${r.chars} chars`),
        h("pre", r.payload || "(no payload)"))));
}
