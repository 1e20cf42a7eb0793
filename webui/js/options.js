// The compile options as controls. The list comes from the server (`GET /api/options`:
// every CompileOptions field the API accepts, its type, default, choices and a one-line
// explanation), so the UI never keeps its own copy; device and backend stay in the top
// bar, the rest sit in the Options panel. Also: after a recompile of the same code, a note
// for every option that changed nothing in the generated code.

import { h, clear } from "./dom.js";
import { getOptions } from "./api.js";

const TOP_BAR = new Set(["device", "backend"]);

// A top-bar select's values from the server's option list (with their labels), keeping
// the current value when the server still offers it; an older server leaves it as it is.
export function fillChoices(select, spec) {
  if (!select || !spec?.choices?.length) return;
  const current = select.value || spec.default;
  clear(select, spec.choices.map((c) => h("option", { value: c }, spec.labels?.[c] ?? String(c))));
  select.value = spec.choices.includes(current) ? current : spec.default;
}

export class OptionControls {
  constructor(panel, summary) {
    this.panel = panel;
    this.summary = summary;
    this.specs = [];
    this.inputs = new Map();
  }

  async load() {
    try {
      const answer = await getOptions();
      this.specs = answer?.options ?? [];
    } catch (err) {
      console.warn("no option list from the server", err);
      this.specs = [];
    }
    if (!this.specs.length) {  // an older server: the two switches it always took
      this.specs = [
        { name: "fusion", type: "bool", default: true, help: "fuse pointwise and reduction ops into fewer kernels" },
        { name: "inductor", type: "bool", default: false, help: "also compile with TorchInductor, to compare" },
      ];
    }
    this.render();
    return this.specs;
  }

  render() {
    this.inputs.clear();
    const rows = this.specs.filter((s) => !TOP_BAR.has(s.name)).map((s) => {
      const input = this.control(s);
      this.inputs.set(s.name, input);
      return h("label.opt-row", { title: s.help ?? "" },
        h("span.opt-name", s.name), input, h("span.opt-help", s.help ?? ""));
    });
    clear(this.panel, rows);
    this.updateSummary();
  }

  control(spec) {
    const onchange = () => this.updateSummary();
    if (spec.type === "bool") {
      return h("input", { type: "checkbox", id: `opt-${spec.name}`, checked: !!spec.default,
        onchange });
    }
    if (spec.choices) {
      return h("select", { id: `opt-${spec.name}`, onchange },
        spec.choices.map((c) => h("option", { value: c, selected: c === spec.default }, String(c))));
    }
    if (spec.type === "str") {  // free text (gpu_target "sm_80", ...): a text field
      return h("input.text", { id: `opt-${spec.name}`, type: "text", value: spec.default ?? "",
        spellcheck: false, onchange });
    }
    const attrs = { id: `opt-${spec.name}`, type: "number", value: spec.default ?? "",
      step: spec.type === "float" ? "any" : "1", onchange };
    if (spec.min !== undefined) attrs.min = spec.min;
    if (spec.max !== undefined) attrs.max = spec.max;
    return h("input.num", attrs);
  }

  spec(name) {
    return this.specs.find((s) => s.name === name);
  }

  values() {
    const out = {};
    for (const [name, input] of this.inputs) {
      const spec = this.spec(name);
      if (spec.type === "bool") out[name] = input.checked;
      else if (spec.choices || spec.type === "str") out[name] = input.value;
      else if (input.value !== "") out[name] = spec.type === "float" ? Number(input.value) : Math.round(Number(input.value));
    }
    return out;
  }

  set(opts = {}) {
    for (const [name, input] of this.inputs) {
      if (opts[name] === undefined) continue;
      if (this.spec(name).type === "bool") input.checked = !!opts[name];
      else input.value = opts[name];
    }
    this.updateSummary();
  }

  setDisabled(flag) {
    for (const input of this.inputs.values()) input.disabled = flag;
  }

  // "Options (2 changed)" on the panel's button.
  updateSummary() {
    const values = this.values();
    const changed = Object.entries(values).filter(([k, v]) => this.spec(k)?.default !== v);
    this.summary.textContent = changed.length ? `Options · ${changed.length} changed` : "Options";
    this.summary.title = changed.map(([k, v]) => `${k} = ${v}`).join("\n") || "all defaults";
  }
}

// What a compile produced that options can change: the kernels, the wrapper, the plan.
export function fingerprint(trace) {
  const codegen = trace.graphs("codegen").map((g) => [g.kernels.map((k) => k.source), g.wrapper?.source]);
  const memory = trace.graphs("memory").map((g) => [g.peak_bytes, g.buffers?.map((b) => b.reused_from)]);
  return JSON.stringify([codegen, memory]);
}

// Notes for options that differ between two compiles of the same code yet left the
// generated code and memory plan exactly as they were.
export function unchangedNotes(before, after) {
  if (!before || !after || before.code !== after.code || before.print !== after.print) return [];
  const notes = [];
  for (const [name, value] of Object.entries(after.options)) {
    const old = before.options[name];
    if (old === undefined || old === value || name === "inductor" || name === "profile") continue;
    let why = "";
    if (name === "fusion") {
      const tried = after.trace.graphs("scheduling").reduce((n, g) => n + (g.decisions?.length ?? 0), 0)
        + before.trace.graphs("scheduling").reduce((n, g) => n + (g.decisions?.length ?? 0), 0);
      why = tried ? "" : ": the scheduler found nothing to fuse (each kernel holds one op chain that needs no fusing)";
    }
    if (name === "memory_reuse") {
      const g = after.trace.graphs("memory");
      if (g.every((m) => m.peak_bytes === m.peak_bytes_no_reuse)) why = ": no buffer dies before another is allocated, so there is nothing to reuse";
    }
    notes.push(`${name} ${old} → ${value} changed nothing in the generated code${why}.`);
  }
  return notes;
}
