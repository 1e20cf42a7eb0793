// Graph pane: the FX graph of each captured graph (capture.graphs[].nodes/edges) and the
// fused-kernel graph (scheduling kernels, edges from the buffers each kernel reads), both
// laid out top-down by dagre, off the main thread where the page gives a `ctx.layout`
// (graphlayout.js). A model's graphs open folded by module (collapse.js; a graph of at
// most WHOLE_UP_TO nodes opens whole): a block is one node, a stack of like blocks one
// node ("h.0-11 ×12"); clicking a folded node opens it. FX nodes are
// coloured by the kernel that computes them; clicking a node shows its details and pins
// its provenance.

import { h, clear, empty, shape, afterFrame } from "../dom.js";
import { fromNode, fromKernel, fromBuffer, fromModule, union, emptySelection } from "../provenance.js";
import { collapse, firstOpen } from "../collapse.js";
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
  { selector: "node.group", style: { "border-width": 2, "border-style": "double",
    "border-color": "#82aaff", "font-weight": "bold" } },
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

// Below this zoom labels cannot be read: revealing a selection never zooms out further.
const MIN_READABLE_ZOOM = 0.8;
// A graph opens fitted down to this zoom; one that needs less (a graph opened wide) is
// shown from its top at MIN_READABLE_ZOOM instead.
const MIN_FIT_ZOOM = 0.15;
const GROUP_COLOUR = "#5d6f96";
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
  // Each graph as Dynamo captures it (capture_graph), then capture's complete list; the
  // kernel graph and colours with lowering and scheduling.
  stages = ["capture_graph", "capture", "lowering", "scheduling"];
  placeholder = "The FX graph appears here after capture.";

  constructor(ctx) {
    super(ctx, "div.pane-body.graph-pane");
    this.graphId = 0;
    this.generation = 0;
    this.open = { fx: null, kg: null };
    this.pick = h("select.graph-pick", { onchange: () => this.showGraph(Number(this.pick.value)) });
    this.fxEl = h("div.cy");
    this.kEl = h("div.cy");
    this.details = h("div.details");
    this.breaks = h("div.breaks");
    this.reset();
  }

  forget() {
    this.fx?.destroy();
    this.kg?.destroy();
    this.fx = this.kg = null;
    this.trace = null;
    this.graphId = 0;
    this.generation += 1;
    this.open = { fx: null, kg: null };
    this.setPending(false);
  }

  /** @param {Trace} trace @param {StageName} stage */
  handles(trace, stage) {
    return stage === "capture" || stage === "capture_graph"
      || (this.stages.includes(stage) && trace.has("capture"));
  }

  /** @param {Trace} trace @param {StageName} stage */
  render(trace, stage) {
    this.trace = trace;
    if (stage === "capture" || stage === "capture_graph") this.build(trace);
    else this.showGraph(this.graphId);
    return true;
  }

  // `data-pending` marks the wait for a layout (tests wait for it to go).
  setPending(flag) {
    if (flag) this.el.dataset.pending = "true";
    else delete this.el.dataset.pending;
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
          h("span.hint", "ATen ops · colour = kernel · click a module to open it"),
          this.zoomBar(() => this.fx, "fx")),
        this.fxEl, this.breaks),
      h("div.graph-col.narrow",
        h("div.graph-title", "Fused kernels", h("span.hint", "edges = buffers read"),
          this.zoomBar(() => this.kg, "kg")),
        this.kEl, this.details));
    // A graph picked while the others stream in stays picked.
    const id = graphs.some((g) => g.id === this.graphId) ? this.graphId : graphs[0]?.id ?? 0;
    this.pick.value = String(id);
    this.showGraph(id);
  }

  // Builds both graphs of graph `id`; a newer call (another event, a graph picked, a
  // module opened) supersedes this one at each wait. `data-pending` marks the wait.
  async showGraph(id) {
    if (id !== this.graphId) this.open = { fx: null, kg: null };
    this.graphId = id;
    const run = ++this.generation;
    const trace = this.trace;
    this.setPending(true);
    const cytoscape = await this.ctx.cytoscape();
    if (run !== this.generation) return;
    const g = trace.graph("capture", id);
    if (!g) return void this.setPending(false);
    const fxEls = this.fxElements(trace, g);
    const kEls = trace.graph("scheduling", id) ? this.kernelElements(trace, id) : null;
    const [fxAt, kAt] = await Promise.all([this.place(fxEls), kEls ? this.place(kEls) : null]);
    if (run !== this.generation) return;
    this.fx?.destroy();
    this.fx = this.draw(cytoscape, this.fxEl, fxEls, fxAt);
    this.wire(this.fx, "fx", (node) => fromNode(this.ctx.index(), id, node.id()));
    this.fit(this.fx);
    this.kg?.destroy();
    this.kg = null;
    clear(this.kEl);
    if (!kEls) {
      this.kEl.append(empty("Kernels appear here after scheduling."));
    } else {
      // The kernel graph in a task of its own, once the FX graph has painted: a model's
      // two graphs drawn and painted together held the page for over 200 ms.
      await afterFrame();
      if (run !== this.generation) return;
      this.kg = this.draw(cytoscape, this.kEl, kEls, kAt);
      this.wire(this.kg, "kg", (node) => node.data("kind") === "kernel"
        ? fromKernel(this.ctx.index(), id, node.id())
        : fromBuffer(this.ctx.index(), id, node.id()));
      this.fit(this.kg);
    }
    this.setPending(false);
    this.select(this.ctx.current());
  }

  // Node positions from the page's layout worker, or null (lay out on the page).
  place(elements) {
    return this.ctx.layout ? this.ctx.layout(elements, LAYOUT).catch(() => null) : null;
  }

  draw(cytoscape, container, elements, positions) {
    const layout = positions ? { name: "preset", positions: (n) => positions[n.id()], fit: false }
      : LAYOUT;
    return cytoscape({ container, elements, style: themed(), layout, minZoom: 0.05, maxZoom: 3 });
  }

  // Opens or folds a unit of one graph (fx or kg) and draws both again.
  toggle(which, unit) {
    const open = this.open[which];
    if (open.has(unit)) open.delete(unit);
    else open.add(unit);
    this.showGraph(this.graphId);
  }

  // A folded unit's selection: its modules', or its kernel's, or its members' own.
  groupSelection(which, data) {
    const index = this.ctx.index();
    const gid = this.graphId;
    if (data.paths?.length) return data.paths.map((p) => fromModule(index, p)).reduce(union);
    const pick = (m) => (which === "fx" ? fromNode(index, gid, m) : fromKernel(index, gid, m));
    return data.members.map(pick).reduce(union, emptySelection());
  }

  /** @param {Trace} trace */
  /** @param {Trace} trace @param {import("../../types/events").CaptureGraph} g */
  fxElements(trace, g) {
    const nodeKernel = new Map();
    for (const k of trace.graph("scheduling", g.id)?.kernels ?? []) {
      for (const o of k.origins) if (!nodeKernel.has(o)) nodeKernel.set(o, k.name);
    }
    const items = g.nodes.map((n) => ({ id: n.name, module: n.module ?? null, node: n,
      io: n.op !== "call_function", op: short(n.target), kernel: nodeKernel.get(n.name) ?? null }));
    this.open.fx ??= firstOpen(items.length);
    const folded = collapse(items, /** @type {[string, string][]} */ (g.edges), this.open.fx);
    const nodes = folded.units.map((u) => {
      if (u.kind !== "node") return this.groupElement(u, "nodes");
      const n = u.item.node;
      const op = u.item.op;
      const label = u.item.io || op === n.name ? n.name : `${n.name}\n${op}`;
      const kernel = u.item.kernel ?? undefined;
      const colour = kernel ? this.ctx.kernelColour(g.id, kernel) : "#3a4256";
      return { group: "nodes", classes: u.item.io ? "io" : "",
        data: { id: n.name, label, colour, kind: "fx", node: n, kernel, members: u.members,
          ...box(label) } };
    });
    const edges = folded.edges.map(([a, b], i) =>
      ({ group: "edges", data: { id: `e${i}`, source: a, target: b, label: "" } }));
    return [...nodes, ...edges];
  }

  // A folded unit as one node: its path (or stack), class and how much it holds.
  groupElement(u, what) {
    const type = u.paths?.length ? this.ctx.index().modules.get(u.paths[0]) : null;
    const label = `${u.label}${type ? ` · ${type}` : ""}\n${u.members.length} ${what} ▸`;
    return { group: "nodes", classes: "group", data: { id: u.id, label, kind: "group",
      colour: GROUP_COLOUR, members: u.members, paths: u.paths ?? [], unit: u.kind, ...box(label) } };
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
    return this.foldKernels(nodes, [...edges.values()]);
  }

  // The kernel graph folded by the kernels' modules, as the FX graph is.
  foldKernels(nodes, edges) {
    const byId = new Map(nodes.map((n) => [n.data.id, n]));
    const items = nodes.map((n) => ({ id: n.data.id, io: n.data.kind !== "kernel",
      module: n.data.kind === "kernel" ? n.data.info.module ?? null : null,
      op: n.data.kind === "kernel" ? n.data.info.kind : "io" }));
    this.open.kg ??= firstOpen(items.length);
    const folded = collapse(items, edges.map((e) => [e.data.source, e.data.target]), this.open.kg);
    const shown = folded.units.map((u) => (u.kind === "node"
      ? { ...byId.get(u.id), data: { ...byId.get(u.id).data, members: u.members } }
      : this.groupElement(u, "kernels")));
    const kept = new Set(folded.units.filter((u) => u.kind === "node").map((u) => u.id));
    const direct = edges.filter((e) => kept.has(e.data.source) && kept.has(e.data.target));
    const joined = new Set(direct.map((e) => `${e.data.source}\u0000${e.data.target}`));
    const between = folded.edges.filter(([a, b]) => !joined.has(`${a}\u0000${b}`))
      .map(([a, b], i) => ({ group: "edges", data: { id: `f${i}`, source: a, target: b, label: "" } }));
    return [...shown, ...direct, ...between];
  }

  wire(cy, which, selectionOf) {
    const pick = (node) => (node.data("kind") === "group"
      ? this.groupSelection(which, node.data()) : selectionOf(node));
    cy.on("mouseover", "node", (e) => this.ctx.hover(pick(e.target)));
    cy.on("mouseout", "node", () => this.ctx.unhover());
    cy.on("tap", "node", (e) => {
      if (e.target.data("kind") === "group") return this.toggle(which, e.target.id());
      this.showDetails(e.target.data());
      this.ctx.pin(pick(e.target));
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
  zoomBar(cyOf, which) {
    const zoom = (factor) => {
      const cy = cyOf();
      if (!cy) return;
      cy.zoom({ level: cy.zoom() * factor, renderedPosition: { x: cy.width() / 2, y: cy.height() / 2 } });
    };
    return h("span.zoom",
      h("button.zbtn", { type: "button", title: "Fit the whole graph", onclick: () => cyOf()?.fit(undefined, 16) }, "fit"),
      h("button.zbtn", { type: "button", title: "Zoom in", onclick: () => zoom(1.25) }, "+"),
      h("button.zbtn", { type: "button", title: "Zoom out", onclick: () => zoom(0.8) }, "−"),
      h("button.zbtn", { type: "button", dataset: { fold: which },
        title: "Fold every module again (click a folded module to open it)",
        onclick: () => { this.open[which] = new Set(); this.showGraph(this.graphId); } }, "fold"));
  }

  // Brings highlighted nodes into view: centred if they fit at this zoom, else fitted.
  reveal(cy, hit) {
    if (!hit.nonempty() || !cy.width()) return;
    const box = hit.renderedBoundingBox();
    const inside = box.x1 >= 0 && box.y1 >= 0 && box.x2 <= cy.width() && box.y2 <= cy.height();
    if (inside) return;
    cy.stop();
    if (box.w > cy.width() * 0.9 || box.h > cy.height() * 0.9) {
      // Never below a readable zoom: too many to fit, the first of them is centred.
      cy.fit(hit, 30);
      if (cy.zoom() < MIN_READABLE_ZOOM) {
        cy.zoom(Math.max(MIN_READABLE_ZOOM, Math.min(cy.zoom(), MAX_FIT_ZOOM)));
        cy.center(hit.first());
      }
    } else {
      cy.center(hit);
    }
  }

  shown() {
    for (const cy of [this.fx, this.kg]) if (cy) this.fit(cy);
  }

  fit(cy) {
    cy.resize();
    cy.fit(undefined, 16);
    if (cy.zoom() > MAX_FIT_ZOOM) {
      cy.zoom(MAX_FIT_ZOOM);
      cy.center();
    } else if (cy.zoom() < MIN_FIT_ZOOM) {
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

  select(sel) {
    const gid = this.graphId;
    const active = sel.nodes.size + sel.kernels.size + sel.buffers.size > 0;
    this.fx?.batch(() => {
      this.fx.elements().removeClass("hl dim");
      if (!active) return;
      const hit = this.fx.nodes().filter((n) =>
        (n.data("members") ?? [n.id()]).some((m) => sel.nodes.has(`${gid}:${m}`)));
      hit.addClass("hl");
      hit.edgesWith(hit).addClass("hl");
      this.fx.elements().not(hit).not(hit.edgesWith(hit)).addClass("dim");
    });
    if (this.fx && active && !this.el.closest("[hidden]")) this.reveal(this.fx, this.fx.nodes(".hl"));
    this.kg?.batch(() => {
      this.kg.elements().removeClass("hl dim");
      if (!active) return;
      const hit = this.kg.nodes().filter((n) =>
        (n.data("members") ?? [n.id()]).some((m) => sel.kernels.has(`${gid}:${m}`)));
      hit.addClass("hl");
      this.kg.edges().filter((e) => sel.buffers.has(`${gid}:${e.data("buffer")}`)).addClass("hl");
      this.kg.elements().not(".hl").addClass("dim");
    });
    if (this.kg && active && !this.el.closest("[hidden]")) this.reveal(this.kg, this.kg.nodes(".hl"));
  }

  // For tests and the console: which FX nodes are marked now.
  highlighted() {
    return this.fx ? this.fx.nodes(".hl").flatMap((n) => n.data("members") ?? [n.id()]) : [];
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
