// Timings pane: whether the compiled code matched eager (run), how fast it ran against
// eager and Inductor (profile totals, each a median with its spread), where every
// microsecond of the call goes (panes/profile_rows.js), each kernel's time and achieved
// bandwidth against the device's measured peak, and what building the kernels cost (compile). Inductor comes
// after our result (the `inductor` event): "Inductor: running…" until it does, then its
// total and each of its kernels' times.

import { h, clear, badge, fmtMs, fmtBytes, fmtNum, shape, growing } from "../dom.js";
import { fromKernel } from "../provenance.js";
import { STAGES, FOLLOW_UPS, inductorAsked, inductorOf, followUpState } from "../trace.js";
import { Pane } from "./pane.js";
import { RowsView, conditions, exportLinks, opComparison, peakMemory, rollups } from "./profile_rows.js";
import { changeClass, fmtSpread, shortSpread } from "../spread.js";

/** @typedef {import("../trace.js").Trace} Trace */
/** @typedef {import("../../types/events").StageName} StageName */

export class TimingsPane extends Pane {
  id = "timings";
  title = "Timings";
  stages = ["compile", "run", "profile", "inductor", "done"];
  placeholder = "Correctness and timings appear here after the kernels run.";

  constructor(ctx) {
    super(ctx, "div.pane-body.timings-pane");
    this.rows = new Map();
    this.reset();
  }

  forget() {
    this.rows.clear();
  }

  /** @param {Trace} trace */
  render(trace) {
    this.rows.clear();
    const ind = inductorOf(trace);
    clear(this.el,
      trace.has("run") ? this.run(trace.data("run")) : null,
      trace.has("profile") ? this.profile(trace.data("profile"), ind, trace) : null,
      trace.has("profile") && inductorAsked(trace) ? this.inductor(trace, ind) : null,
      trace.has("compile") ? this.compile(trace) : null,
      this.stageTimes(trace));
    this.select(this.ctx.current());
    return trace.has("run") || trace.has("profile");
  }

  /** @param {import("../../types/events").Run} run */
  run(run) {
    return h("section",
      h("h3", "Correctness", run.ok ? badge("pass", "ok") : badge("fail", "bad"),
        h("span.hint", `against eager, atol ${run.atol} rtol ${run.rtol}`)),
      h("table.grid", h("thead", h("tr", ["output", "shape", "dtype", "max abs err",
        "max rel err", ""].map((c) => h("th", c)))),
      rowsAsRead(run.outputs, (o) => h("tr",
        h("td.num", o.index), h("td", shape(o.shape)), h("td", o.dtype),
        h("td.num", fmtNum(o.max_abs_err)), h("td.num", fmtNum(o.max_rel_err)),
        h("td", o.ok ? badge("pass", "ok") : badge("fail", "bad"))), 6)),
      (run.chained ?? []).map((c) => this.chained(c)));
  }

  // Training: the backward graph run on what the compiled forward saved, as a step runs it.
  /** @param {import("../../types/events").ChainedCheck} c */
  chained(c) {
    const worst = Math.max(0, ...c.outputs.map((o) => o.max_abs_err ?? 0));
    return h("p.note.chained", { dataset: { forward: c.forward, backward: c.backward } },
      c.ok ? badge("pass", "ok") : badge("fail", "bad"),
      ` backward graph ${c.backward} run on the activations compiled forward graph ${c.forward} saved: `,
      `${c.outputs.length} gradients, max abs err ${fmtNum(worst)}`);
  }

  /**
   * @param {import("../../types/events").Profile} p
   * @param {import("../../types/events").Inductor | null} ind
   * @param {Trace} trace
   */
  profile(p, ind, trace) {
    if (!p.measured) {
      return h("section", h("h3", "Performance"),
        h("div.notice", h("b", "Not measured. "), p.reason ?? "no reason given"));
    }
    const eager = p.eager_time ?? { ms: p.eager_ms };
    /** @type {[string, any, string][]} */
    const all = [["eager", eager, "base"],
      ["kernelscope", p.kernelscope_time ?? { ms: p.kernelscope_ms }, ""],
      ["inductor", ind?.inductor_time ?? (ind?.inductor_ms != null ? { ms: ind.inductor_ms } : null), ""]];
    const totals = all.filter(([, t]) => t && t.ms !== null && t.ms !== undefined);
    const max = Math.max(...totals.map(([, t]) => t.p90 ?? t.ms));
    // Faster (green) or slower (red) than eager only where the spreads do not overlap.
    const vsEager = (t) => ({ faster: "good", slower: "slow" }[changeClass(eager, t)] ?? "alt");
    const speedup = (t) => {
      if (!eager.ms || !t.ms || t.noisy || eager.noisy) return "";
      const x = eager.ms / t.ms;
      const same = changeClass(eager, t) === "" && eager.p10 != null ? " (within the spread)" : "";
      return (x >= 1 ? `${x.toFixed(2)}× faster than eager` : `${(1 / x).toFixed(2)}× slower than eager`) + same;
    };
    const kmax = Math.max(...p.kernels.map((k) => k.ms ?? 0), 1e-9);
    const rows = new RowsView(p, (r) => this.ctx.hover(fromKernel(this.ctx.index(), r.graph, r.name)),
      () => this.ctx.unhover());
    return h("section",
      h("h3", "Performance", h("span.hint", `${p.device ?? ""}${p.peak_gbps ? ` · measured peak ${fmtNum(p.peak_gbps)} GB/s` : ""}`)),
      h("div.bars", totals.map(([label, t, cls]) => h("div.hbar-row", { dataset: { total: label, noisy: t.noisy ? "true" : "false" }, title: fmtSpread(t) },
        h("span.hbar-label", label),
        h("span.hbar-track", h(`span.hbar.${cls || vsEager(t)}`, { style: { width: `${(100 * t.ms) / max}%` } }),
          t.p10 != null && t.p90 != null ? h("span.hbar-spread", { style: {
            left: `${(100 * t.p10) / max}%`, width: `${(100 * (t.p90 - t.p10)) / max}%` } }) : null),
        h("span.hbar-value", t.noisy ? shortSpread(t) : fmtMs(t.ms),
          h("small", ` ${t.repeats ? `±p10–p90 ${fmtMs(t.p10)}–${fmtMs(t.p90)}, ${t.repeats} repeats` : ""}` +
            (label === "eager" ? "" : ` ${speedup(t)}`)))))),
      conditions(p), peakMemory(p, ind), rows.el, rollups(p.ours), opComparison(p),
      exportLinks(p, trace.graphs("capture"), trace.data("source")),
      h("h3", "Generated kernels", h("span.hint", "time per launch and bandwidth")),
      h("table.grid.kernels", h("thead", h("tr", ["kernel", "time", "bandwidth (bar: % of peak)"]
        .map((c) => h("th", c)))),
      h("tbody", p.kernels.map((k) => this.kernelRow(k, kmax, p.peak_gbps)))));
  }

  // TorchInductor on the same graphs: running until its event comes (the job's own result
  // is complete before it, `done` and the permalink too: Inductor follows, stored into the
  // same trace), then its time per call and each kernel's time per launch.
  /** @param {Trace} trace @param {import("../../types/events").Inductor | null} ind */
  inductor(trace, ind) {
    const head = (state) => h("h3", "TorchInductor", h("span.hint", state));
    if (!ind) {
      const follow = followUpState(trace, "inductor");
      const state = !trace.done || follow === "running" ? "running"
        : follow === "lost" ? "lost" : "missing";
      const text = {
        running: trace.done
          ? "Inductor: running… (our result above is complete and has its permalink; " +
            "Inductor's comparison is added to it when it finishes)"
          : "Inductor: running… (our result above is complete)",
        lost: "Inductor: did not finish (the server stopped before it was stored).",
        missing: "Inductor: did not run (the job ended first).",
      }[state];
      return h("section.inductor", { dataset: { state } },
        head(state === "running" ? "same graphs, stock torch.compile" : ""),
        h("div.notice", text));
    }
    const failed = ind.error ? h("div.notice.inductor-failed", h("b", "Inductor failed: "),
      ind.error) : null;
    const total = ind.measured
      ? h("p.note", `${fmtSpread(ind.inductor_time ?? { ms: ind.inductor_ms })} per call on ${ind.device || "?"}`)
      : h("div.notice", h("b", "Not timed. "), ind.reason ?? "");
    const kmax = Math.max(...ind.kernels.map((k) => k.ms ?? 0), 1e-9);
    return h("section.inductor", { dataset: { state: "done" } },
      head(`${ind.kernels.length} kernels`), failed, total,
      ind.kernels.length ? h("table.grid.inductor-kernels", h("thead", h("tr",
        ["Inductor kernel", "language", "time per launch"].map((c) => h("th", c)))),
      h("tbody", ind.kernels.map((k) => h("tr", { dataset: { kernel: k.name } },
        h("td", k.name), h("td", k.language),
        h("td", h("div.barcell", h("span.mini-track", h("span.mini.time",
          { style: { width: `${(100 * (k.ms ?? 0)) / kmax}%` } })),
        h("span.mini-val", k.ms != null ? fmtMs(k.ms) : "–"))))))) : null);
  }

  /** @param {import("../../types/events").KernelTime} k @param {number} kmax @param {number | null} peak */
  kernelRow(k, kmax, peak) {
    const gid = k.graph ?? this.ctx.index().kernels.find((x) => x.name === k.name)?.gid ?? 0;
    const pct = k.pct_peak ?? (peak && k.gbps ? (100 * k.gbps) / peak : null);
    const tr = h("tr", { title: `${k.name}: ${fmtBytes(k.bytes)} moved in ${fmtSpread(k.time ?? { ms: k.ms })}` },
      h("td", h("span.chip", { style: { "--kc": this.ctx.kernelColour(gid, k.name) } }, k.name)),
      h("td", h("div.barcell", h("span.mini-track", h("span.mini.time", { style: { width: `${(100 * k.ms) / kmax}%` } })),
        h("span.mini-val", shortSpread(k.time ?? { ms: k.ms })))),
      h("td", h("div.barcell", h("span.mini-track.peak", h("span.mini.bw", { style: { width: `${Math.min(pct ?? 0, 100)}%` } })),
        h("span.mini-val", k.gbps !== null && k.gbps !== undefined
          ? `${fmtNum(k.gbps)} GB/s${pct !== null ? ` · ${pct.toFixed(0)}%` : ""}` : "–"))));
    tr.addEventListener("mouseenter", () => this.ctx.hover(fromKernel(this.ctx.index(), gid, k.name)));
    tr.addEventListener("mouseleave", () => this.ctx.unhover());
    this.rows.set(`${gid}:${k.name}`, tr);
    return tr;
  }

  /** @param {Trace} trace */
  compile(trace) {
    const buildText = (g) => [
      g.build_ms !== undefined && g.build_ms !== null
        ? (g.cache_hit && !g.build_ms ? "g++ build: cached" : `g++ build ${fmtMs(g.build_ms)}`) : null,
      g.ms !== undefined && g.ms !== null ? `load and first launches ${fmtMs(g.ms)}` : null,
      g.cache_hit ? "cache hit" : "cache miss",
      g.path ? g.path : null].filter(Boolean).join(" · ");
    return h("section", h("h3", "Build", h("span.hint", "first launch: the kernel's first call on zero inputs (Triton: includes its JIT compile)")),
      trace.graphs("compile").map((g) => h("div",
      h("p.note", `graph ${g.id}: ${buildText(g)}`),
      h("table.grid", h("thead", h("tr", ["kernel", "first launch", "cache", "registers", "spills", "shared"]
        .map((c) => h("th", c)))),
      rowsAsRead(g.kernels, (k) => h("tr",
        h("td", k.name), h("td.num", fmtMs(k.ms)), h("td", k.cache_hit ? "hit" : "miss"),
        h("td.num", k.registers ?? "–"), h("td.num", k.spills ?? "–"),
        h("td.num", k.shared_bytes !== undefined && k.shared_bytes !== null ? fmtBytes(k.shared_bytes) : "–")), 6)))));
  }

  /** @param {Trace} trace */
  stageTimes(trace) {
    const done = [...STAGES, ...FOLLOW_UPS].filter((s) => trace.has(s));
    if (!done.length) return null;
    const max = Math.max(...done.map((s) => trace.ms(s) ?? 0), 1e-9);
    return h("section", h("h3", "Stages", h("span.hint", "wall time of each compiler stage")),
      h("div.bars", done.map((s) => h("div.hbar-row",
        h("span.hbar-label", s),
        h("span.hbar-track", h("span.hbar.stage", { style: { width: `${(100 * (trace.ms(s) ?? 0)) / max}%` } })),
        h("span.hbar-value", fmtMs(trace.ms(s)))))));
  }

  select(sel) {
    for (const [key, tr] of this.rows) tr.classList.toggle("hl", sel.kernels.has(key));
  }
}

// A model's step checks a thousand outputs and builds hundreds of kernels: their rows are
// drawn in chunks as they are scrolled to.
function rowsAsRead(items, make, columns) {
  return growing(h("tbody"), items, make,
    (left) => h("tr.more", h("td", { colspan: columns }, `${left} more rows…`)));
}
