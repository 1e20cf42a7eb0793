// Graph pane: the FX graph of each captured graph (capture.graphs[].nodes/edges) and the
// fused-kernel graph (scheduling kernels, edges from the buffers each kernel reads), both
// laid out top-down by dagre. FX nodes are coloured by the kernel that computes them;
// clicking a node shows its details and pins its provenance.

import { h, clear, empty, shape } from "../dom.js";
import { fromNode, fromKernel, fromBuffer } from "../provenance.js";
import { Pane } from "./pane.js";

/** @typedef {import("../trace.js").Trace} Trace */
/** @typedef {import("../../types/events").StageName} StageName */

const STYLE = [
  { selector: "node", style: {
    "background-color": "data(colour)", label: "data(label)", color: "#0b0e14",
    "font-family": "DejaVu Sans Mono, Menlo, Consolas, monospace", "font-size": 11,
    "text-wrap": "wrap", "text-valign": "center", "text-halign": "center",
    shape: "round-rectangle", width: "data(w)", height: "data(hgt)",
    "border-width": 1, "border-color": "#0d1117" } },
  { selector: "node.io", style: { "background-color": "#2a3142", "border-color": "#6b7489",
    "border-style": "dashed", "border-width": 1, color: "#c9cfdb" } },
  { selector: "edge", style: {
    width: 1.3, "line-color": "#4b5468", "target-arrow-color": "#4b5468",
    "target-arrow-shape": "triangle", "curve-style": "bezier", "arrow-scale": 0.8,
    label: "data(label)", "font-size": 9, color: "#9aa3b8",
    "font-family": "DejaVu Sans Mono, Menlo, Consolas, monospace",
    "text-background-color": "#10141c", "text-background-opacity": 1,
    "text-background-padding": 2 } },
  { selector: ".dim", style: { opacity: 0.28 } },
  { selector: "node.hl", style: { "border-width": 3, "border-color": "#ffd166", opacity: 1 } },
  { selector: "edge.hl", style: { "line-color": "#ffd166", "target-arrow-color": "#ffd166",
    opacity: 1 } },
  { selector: "node:selected", style: { "border-width": 3, "border-color": "#ffffff" } },
];

// STYLE with the page theme's colours (css/app.css variables) for what sits on the graph's
// background: edge lines, their labels, and input/output nodes.
function themed() {
  const css = getComputedStyle(document.documentElement);
  const v = (name, fallback) => css.getPropertyValue(name).trim() || fallback;
  const bg = v("--graph-bg", "#10141c"), dim = v("--fg-dim", "#9aa3b8"), fg = v("--fg", "#c9cfdb");
  const line = v("--line", "#4b5468"), raised = v("--bg-raised", "#2a3142");
  return STYLE.map((rule) => {
    if (rule.selector === "edge") {
      return { ...rule, style: { ...rule.style, color: dim, "text-background-color": bg,
        "line-color": dim, "target-arrow-color": dim } };
    }
    if (rule.selector === "node.io") {
      return { ...rule, style: { ...rule.style, "background-color": raised, color: fg,
        "border-color": line } };
    }
    return rule;
  });
}

// Below this zoom labels cannot be read; a long graph is shown from its top instead.
const MIN_READABLE_ZOOM = 0.8;
// Above this a small graph looks blown up; it is centred at this zoom instead.
const MAX_FIT_ZOOM = 1.25;

// longest-path ranking puts each input just above its first use: a model's parameters
// sit beside the layer that reads them, not in one row as wide as the model.
const LAYOUT = { name: "dagre", rankDir: "TB", nodeSep: 18, rankSep: 34, edgeSep: 8,
  padding: 16, animate: false, ranker: "longest-path" };

// "aten.mul.Tensor" -> "mul": the overload adds nothing on a graph node.
const short = (target) => {
  const parts = String(target ?? "").split(".");
  return parts[0] === "aten" && parts.length > 1 ? parts[1] : parts.join(".");
};

function box(label) {
  const lines = label.split("\n");
  return { w: Math.max(...lines.map((l) => l.length)) * 6.9 + 18, hgt: lines.length * 14 + 12 };
}

export class GraphPane extends Pane {
  id = "graph";
  title = "Graph";

  constructor(ctx) {
    super(ctx, "div.pane-body.graph-pane");
    this.graphId = 0;
    this.pick = h("select.graph-pick", { onchange: () => this.showGraph(Number(this.pick.value)) });
    this.fxEl = h("div.cy");
    this.kEl = h("div.cy");
    this.details = h("div.details");
    this.breaks = h("div.breaks");
    this.reset();
  }

  reset() {
    this.fx?.destroy();
    this.kg?.destroy();
    this.fx = this.kg = null;
    this.trace = null;
    this.graphId = 0;
    delete this.el.dataset.filled;
    clear(this.el, empty("The FX graph appears here after capture."));
  }

  /** @param {Trace} trace @param {StageName} stage */
  update(trace, stage) {
    this.trace = trace;
    // Each graph as Dynamo captures it (capture_graph), then capture's complete list.
    if (stage === "capture" || stage === "capture_graph") this.build(trace);
    if ((stage === "lowering" || stage === "scheduling") && trace.has("capture")) {
      this.showGraph(this.graphId);
    }
  }

  /** @param {Trace} trace */
  build(trace) {
    const graphs = trace.graphs("capture");
    clear(this.pick, graphs.map((g) => h("option", { value: g.id }, `graph ${g.id}`)));
    const data = trace.data("capture");
    clear(this.breaks, (data?.graph_breaks ?? []).map((b) =>
      h("div.break", h("b", "graph break"), ` line ${b.line ?? "?"}: ${b.reason}`)));
    clear(this.el,
      h("div.graph-col",
        h("div.graph-title", "FX graph", graphs.length > 1 ? this.pick : null,
          h("span.hint", "ATen ops · colour = kernel"), this.zoomBar(() => this.fx)),
        this.fxEl, this.breaks),
      h("div.graph-col.narrow",
        h("div.graph-title", "Fused kernels", h("span.hint", "edges = buffers read"),
          this.zoomBar(() => this.kg)),
        this.kEl, this.details));
    // A graph picked while the others stream in stays picked.
    const id = graphs.some((g) => g.id === this.graphId) ? this.graphId : graphs[0]?.id ?? 0;
    this.pick.value = String(id);
    this.showGraph(id);
    this.el.dataset.filled = "true";
  }

  async showGraph(id) {
    this.graphId = id;
    const trace = this.trace;
    const cytoscape = await this.ctx.cytoscape();
    // A reset or a newer event may have come while cytoscape loaded.
    if (trace !== this.trace || id !== this.graphId) return;
    const g = trace.graph("capture", id);
    if (!g) return;
    this.fx?.destroy();
    this.fx = cytoscape({ container: this.fxEl, elements: this.fxElements(trace, g),
      style: themed(), layout: LAYOUT, minZoom: 0.1, maxZoom: 3 });
    this.wire(this.fx, (node) => fromNode(this.ctx.index(), id, node.id()));
    this.kg?.destroy();
    this.kg = null;
    clear(this.kEl);
    if (!trace.graph("scheduling", id)) {
      this.kEl.append(empty("Kernels appear here after scheduling."));
    } else {
      this.kg = cytoscape({ container: this.kEl, elements: this.kernelElements(trace, id),
        style: themed(), layout: LAYOUT, minZoom: 0.1, maxZoom: 3 });
      this.wire(this.kg, (node) => node.data("kind") === "kernel"
        ? fromKernel(this.ctx.index(), id, node.id())
        : fromBuffer(this.ctx.index(), id, node.id()));
    }
    this.select(this.ctx.current());
    this.shown();
  }

  /** @param {Trace} trace */
  /** @param {Trace} trace @param {import("../../types/events").CaptureGraph} g */
  fxElements(trace, g) {
    const nodeKernel = new Map();
    for (const k of trace.graph("scheduling", g.id)?.kernels ?? []) {
      for (const o of k.origins) if (!nodeKernel.has(o)) nodeKernel.set(o, k.name);
    }
    const nodes = g.nodes.map((n) => {
      const io = n.op !== "call_function";
      const op = short(n.target);
      const label = io || op === n.name ? n.name : `${n.name}\n${op}`;
      const kernel = nodeKernel.get(n.name);
      const colour = kernel ? this.ctx.kernelColour(g.id, kernel) : "#3a4256";
      return { group: "nodes", classes: io ? "io" : "",
        data: { id: n.name, label, colour, kind: "fx", node: n, kernel, ...box(label) } };
    });
    const edges = g.edges.map(([a, b], i) =>
      ({ group: "edges", data: { id: `e${i}`, source: a, target: b, label: "" } }));
    return [...nodes, ...edges];
  }

  /** @param {Trace} trace */
  /** @param {Trace} trace @param {number} gid */
  kernelElements(trace, gid) {
    const sched = trace.graph("scheduling", gid);
    const low = trace.graph("lowering", gid);
    const producer = new Map();
    const nodes = [];
    for (const inp of low?.inputs ?? []) {
      producer.set(inp.name, inp.name);
      nodes.push({ group: "nodes", classes: "io", data: { id: inp.name, label: inp.name,
        kind: "input", colour: "#2a3142", info: inp, ...box(inp.name) } });
    }
    for (const k of sched.kernels) {
      k.buffers.forEach((b) => producer.set(b, k.name));
      const label = `${k.name}\n${k.kind} · ${k.buffers.join(", ")}`;
      nodes.push({ group: "nodes", data: { id: k.name, label, kind: "kernel", info: k,
        colour: this.ctx.kernelColour(gid, k.name), ...box(label) } });
    }
    const buffers = new Map((low?.buffers ?? []).map((b) => [b.name, b]));
    const edges = new Map();
    for (const k of sched.kernels) {
      for (const b of k.buffers) {
        for (const r of buffers.get(b)?.reads ?? []) {
          const from = producer.get(r.buffer);
          if (!from || from === k.name) continue;
          const id = `${from}->${k.name}:${r.buffer}`;
          edges.set(id, { group: "edges", data: { id, source: from, target: k.name,
            label: r.buffer, buffer: r.buffer } });
        }
      }
    }
    for (const out of low?.outputs ?? []) {
      const from = producer.get(out);
      if (!from) continue;
      const id = `out:${out}`;
      nodes.push({ group: "nodes", classes: "io", data: { id, label: `output ${out}`,
        kind: "output", colour: "#2a3142", ...box(`output ${out}`) } });
      edges.set(id, { group: "edges", data: { id: `${id}:e`, source: from, target: id,
        label: out } });
    }
    return [...nodes, ...edges.values()];
  }

  wire(cy, selectionOf) {
    cy.on("mouseover", "node", (e) => this.ctx.hover(selectionOf(e.target)));
    cy.on("mouseout", "node", () => this.ctx.unhover());
    cy.on("tap", "node", (e) => {
      this.showDetails(e.target.data());
      this.ctx.pin(selectionOf(e.target));
    });
    cy.on("tap", (e) => { if (e.target === cy) this.ctx.clearPin(); });
  }

  showDetails(d) {
    const rows = [];
    const row = (k, v) => rows.push(h("tr", h("th", k), h("td", v ?? "–")));
    if (d.kind === "fx") {
      const n = d.node;
      row("node", n.name);
      row("op", n.op);
      row("target", n.target);
      row("args", JSON.stringify(n.args));
      row("shape", shape(n.shape));
      row("dtype", n.dtype);
      row("stride", shape(n.stride));
      row("line", n.line ? `${n.line}: ${n.source ?? ""}` : "–");
      row("module", moduleText(n.module, this.ctx.index()));
      row("kernel", d.kernel);
    } else if (d.kind === "kernel") {
      const k = d.info;
      row("kernel", k.name);
      row("kind", k.kind);
      row("numel", `${k.numel}${k.rnumel > 1 ? ` × ${k.rnumel} (reduction)` : ""}`);
      row("buffers", k.buffers.join(", "));
      if (k.parts?.length) {  // a combo kernel: independent kernels launched as one
        row("parts", k.parts.map((p) => `${p.name} (${p.numel})`).join(", "));
      }
      row("FX nodes", k.origins.join(", "));
      row("lines", k.lines.join(", "));
      row("module", moduleText(k.module, this.ctx.index(), k.modules));
    } else if (d.info) {
      row("input", d.info.name);
      row("shape", shape(d.info.size));
      row("dtype", d.info.dtype);
      row("stride", shape(d.info.stride));
    }
    clear(this.details, h("table.kv", rows));
  }

  // Fit / zoom in / zoom out for one graph (the wheel and drag work too).
  zoomBar(cyOf) {
    const zoom = (factor) => {
      const cy = cyOf();
      if (!cy) return;
      cy.zoom({ level: cy.zoom() * factor, renderedPosition: { x: cy.width() / 2, y: cy.height() / 2 } });
    };
    return h("span.zoom",
      h("button.zbtn", { type: "button", title: "Fit the whole graph", onclick: () => cyOf()?.fit(undefined, 16) }, "fit"),
      h("button.zbtn", { type: "button", title: "Zoom in", onclick: () => zoom(1.25) }, "+"),
      h("button.zbtn", { type: "button", title: "Zoom out", onclick: () => zoom(0.8) }, "−"));
  }

  // Brings highlighted nodes into view: centred if they fit at this zoom, else fitted.
  reveal(cy, hit) {
    if (!hit.nonempty() || !cy.width()) return;
    const box = hit.renderedBoundingBox();
    const inside = box.x1 >= 0 && box.y1 >= 0 && box.x2 <= cy.width() && box.y2 <= cy.height();
    if (inside) return;
    cy.stop();
    if (box.w > cy.width() * 0.9 || box.h > cy.height() * 0.9) {
      cy.fit(hit, 30);
      if (cy.zoom() < 0.3) cy.zoom(0.3);
    } else {
      cy.center(hit);
    }
  }

  shown() {
    for (const cy of [this.fx, this.kg]) {
      if (!cy) continue;
      cy.resize();
      cy.fit(undefined, 16);
      if (cy.zoom() > MAX_FIT_ZOOM) {
        cy.zoom(MAX_FIT_ZOOM);
        cy.center();
      } else if (cy.zoom() < MIN_READABLE_ZOOM) {
        // Readable zoom, from the graph's top row (the middle of a wide graph's bounding
        // box may hold no node at all), and from the left edge that shows the most of the
        // rows in view whole: a node's left side that cuts no other node in two.
        const first = cy.nodes().min((n) => n.boundingBox().y1 * 1e6 + n.position().x).ele;
        const top = first.boundingBox().y1;
        const z = MIN_READABLE_ZOOM;
        const rows = cy.nodes().filter((n) => n.boundingBox().y1 < top + cy.height() / z);
        const left = readableLeft(first.boundingBox(), rows.map((n) => n.boundingBox()),
          (cy.width() - 32) / z, 16 / z);
        cy.zoom(z);
        cy.pan({ x: 16 - left * z, y: 16 - top * z });
      }
    }
  }

  select(sel) {
    const gid = this.graphId;
    const active = sel.nodes.size + sel.kernels.size + sel.buffers.size > 0;
    this.fx?.batch(() => {
      this.fx.elements().removeClass("hl dim");
      if (!active) return;
      const hit = this.fx.nodes().filter((n) => sel.nodes.has(`${gid}:${n.id()}`));
      hit.addClass("hl");
      hit.edgesWith(hit).addClass("hl");
      this.fx.elements().not(hit).not(hit.edgesWith(hit)).addClass("dim");
    });
    if (this.fx && active && !this.el.closest("[hidden]")) this.reveal(this.fx, this.fx.nodes(".hl"));
    this.kg?.batch(() => {
      this.kg.elements().removeClass("hl dim");
      if (!active) return;
      const hit = this.kg.nodes().filter((n) => sel.kernels.has(`${gid}:${n.id()}`));
      hit.addClass("hl");
      this.kg.edges().filter((e) => sel.buffers.has(`${gid}:${e.data("buffer")}`)).addClass("hl");
      this.kg.elements().not(".hl").addClass("dim");
    });
    if (this.kg && active && !this.el.closest("[hidden]")) this.reveal(this.kg, this.kg.nodes(".hl"));
  }

  // For tests and the console: which FX nodes are marked now.
  highlighted() {
    return this.fx ? this.fx.nodes(".hl").map((n) => n.id()) : [];
  }
}

// The left edge (a node's x1) that keeps the `first` box whole in view and shows the
// most of these boxes whole within `width`, the view starting `margin` left of it cutting
// none in two; the leftmost on a tie. When every such edge cuts a node (a kernel graph
// whose kernels, wider than the pane, step down to the left), `first`'s own edge.
function readableLeft(first, boxes, width, margin) {
  const whole = (b, edge) => b.x1 >= edge - margin && b.x2 <= edge + width;
  let left = first.x1, most = -1;
  for (const edge of boxes.map((b) => b.x1).sort((a, b) => a - b)) {
    if (!whole(first, edge)) continue;
    if (boxes.some((b) => b.x1 < edge - margin && b.x2 > edge - margin)) continue;
    const seen = boxes.filter((b) => whole(b, edge)).length;
    if (seen > most) { most = seen; left = edge; }
  }
  return left;
}

// "blocks.1.attn (Attention)", with the other modules a fused kernel spans.
function moduleText(path, index, all = []) {
  if (path === null || path === undefined) return "–";
  const type = index.modules.get(path);
  const head = `${path || "(root)"}${type ? ` (${type})` : ""}`;
  const more = all.filter((m) => m !== path);
  return more.length ? `${head}; spans ${more.join(", ")}` : head;
}
