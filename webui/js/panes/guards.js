// Guards pane: every Dynamo frame compile of the snippet's calls (capture.compiles), the
// checks (guards) Dynamo runs before it reuses each one, in words, and for every
// recompile the guard failure that caused it; then the graph breaks with their reasons.

import { h, clear, badge, plural, shape, growing } from "../dom.js";
import { fromSourceLine, lineColour } from "../provenance.js";
import { Pane } from "./pane.js";

/** @typedef {import("../trace.js").Trace} Trace */

/** @typedef {import("../../types/events").StageName} StageName */

// A model's compile has hundreds of guards (the GPT-2 step's two compiles 200 each, a
// first show of 440-580 ms at load 10): each table draws this many rows at once, the rest
// as they are scrolled to.
const FIRST_GUARDS = 40;

export class GuardsPane extends Pane {
  id = "guards";
  title = "Guards";
  stages = ["capture"];
  placeholder = "Dynamo's guards and recompiles appear here after capture.";

  constructor(ctx) {
    super(ctx, "div.pane-body.guards-pane");
    this.reset();
  }

  /** @param {Trace} trace */
  render(trace) {
    const data = /** @type {import("../../types/events").Capture} */ (trace.data("capture"));
    const compiles = data.compiles ?? [];
    const breaks = data.graph_breaks ?? [];
    const recompiles = compiles.filter((c) => c.recompile).length;
    clear(this.el,
      h("h3", plural(compiles.length, "Dynamo compile"),
        h("span.hint", recompiles
          ? `${plural(recompiles, "recompile")}: a later call failed a guard of every earlier compile`
          : "no recompiles: every call reused the first compile")),
      compiles.length ? compiles.map((c, i) => this.compile(c, i, data.graphs ?? []))
        : h("p.note", "This trace records no guards (it was made before guards were captured)."),
      this.calls(data.calls ?? []),
      h("h3", plural(breaks.length, "graph break"),
        h("span.hint", breaks.length ? "Dynamo split the function here" : "one graph per frame")),
      breaks.map((b) => h("div.gbreak", this.lineChip(b.line), h("span", b.reason))));
    return true;
  }

  // Every replayed call and what ran it: a compile it caused, or the earlier compile whose
  // guards it passed (a call after a recompile often reuses the dynamic compile).
  /** @param {import("../../types/events").SnippetCall[]} calls */
  calls(calls) {
    if (!calls.length) return null;
    const inputs = (c) => (c.inputs ?? []).map((x) => x.shape ? `${x.dtype}${shape(x.shape)}` : x.value)
      .join(", ");
    return h("details.call-list", { open: calls.some((c) => !c.compiled) },
      h("summary", `${plural(calls.length, "call")} of the compiled function`),
      h("table.grid.calls", h("tbody", calls.map((c) => h("tr", { dataset: { call: c.call + 1 } },
        h("td", `call ${c.call + 1}`), h("td.mono", `(${inputs(c)})`),
        h("td", c.compiled ? `compiled ${c.compile_ids.join(", ")}`
          : c.compile_ids.length ? `reused ${c.compile_ids[0]}: its guards held`
            : "did not run (replaying it failed)"),
        h("td.note", c.failed?.length ? `failed the guards of ${c.failed.join(", ")}` : ""))))));
  }

  lineChip(line) {
    if (!line) return h("span.line-chip.none", "–");
    const chip = h("span.line-chip", { style: { "--pc": lineColour(line) }, title: `line ${line}`,
      tabindex: 0 }, String(line));
    const sel = () => fromSourceLine(this.ctx.index(), line);
    chip.addEventListener("mouseenter", () => this.ctx.hover(sel()));
    chip.addEventListener("mouseleave", () => this.ctx.unhover());
    chip.addEventListener("click", () => { this.ctx.pin(sel()); this.ctx.revealLine?.(line); });
    return chip;
  }

  // The graphs this compile made (a recompile's are compiled like the first's): each a
  // button that shows that graph alone in every pane.
  /** @param {import("../../types/events").DynamoCompile} c @param {import("../../types/events").CaptureGraph[]} graphs */
  made(c, graphs) {
    const mine = graphs.filter((g) => g.compile_id && g.compile_id === c.compile_id);
    if (!c.compile_id) return null;
    if (!mine.length) return h("p.note.compile-graphs", "No ATen graph: nothing in this frame to compile.");
    return h("div.compile-graphs", h("b", "Graphs: "), mine.map((g) => {
      const b = h("button.gtab", { dataset: { graph: g.id }, title: "show this graph in every pane" },
        `${g.kind ?? "graph"} ${g.id}`);
      b.addEventListener("click", () => this.ctx.showGraphs?.([g.id]));
      return b;
    }));
  }

  /** @param {import("../../types/events").DynamoCompile} c @param {number} i @param {import("../../types/events").CaptureGraph[]} graphs */
  compile(c, i, graphs) {
    const inputs = (c.inputs ?? []).map((x) => x.shape
      ? `${x.dtype}${shape(x.shape)}${x.requires_grad ? " requires_grad" : ""}` : x.value);
    const guards = c.guards ?? [];
    return h("section.compile-card", { dataset: { compile: c.compile_id ?? `error${i}` } },
      h("div.compile-head",
        h("span.cid", c.compile_id ?? "–"),
        c.recompile ? badge("recompile", "warn") : badge("first compile", "ok"),
        h("span", `${c.function ?? "?"}${c.line ? ` (line ${c.line})` : ""}`),
        h("span.meta", `call ${c.call + 1}: (${inputs.join(", ")})` +
          (c.grad_mode === undefined ? "" : ` · grad ${c.grad_mode ? "on" : "off"}`))),
      c.reasons?.length ? h("div.reasons", h("b", "Why it recompiled: "),
        h("ul", c.reasons.map((r) => h("li", r)))) : null,
      c.error ? h("div.reasons", h("b", "Replaying this call failed: "), c.error) : null,
      this.made(c, graphs),
      guards.length ? h("table.grid.guards", growing(h("tbody"), guards, (g) => h("tr",
        h("td", this.lineChip(g.line)), h("td", badge(g.kind)), h("td.mono.wrap", g.text)),
      (left) => h("tr.more", h("td", { colspan: 3 }, `${plural(left, "more guard")}…`)),
      { first: FIRST_GUARDS })) : null,
      c.hidden_guards ? h("p.note", `${plural(c.hidden_guards, "bookkeeping guard")} not listed ` +
        "(dynamic-dimension markers, ambient state).") : null,
      c.raw ? h("details", h("summary", "Dynamo's guard tree (TORCH_LOGS=guards)"),
        h("pre.code-plain", c.raw)) : null);
  }
}
