// Modules pane: the nn.Module tree of the compiled model (capture's `modules`: path and
// class), each module with how many FX nodes, buffers and kernels lie in it. Hovering a
// row selects the module's provenance everywhere (its lines, nodes, buffers, kernels);
// clicking pins it and lists them below the tree. Repeated blocks (`blocks.0`,
// `blocks.1`) are rows of their own: the same source lines, told apart by path.

import { h, clear, empty, badge } from "../dom.js";
import { fromModule, fromNode, fromBuffer, fromKernel } from "../provenance.js";
import { Pane } from "./pane.js";

/** @typedef {import("../trace.js").Trace} Trace */
/** @typedef {import("../../types/events").StageName} StageName */

const ROOT = "";
const NONE = { nodes: 0, buffers: 0, kernels: 0 };

// Each module's count of nodes, buffers and kernels in it or in a module inside it (what
// provenance.js's `inModule` says of each), in one pass over them: a path and every path
// above it, up to the root (""), each counted once per item.
export function countsByModule(index) {
  const counts = new Map();
  const within = (modules) => {
    const paths = new Set();
    for (const m of modules) {
      if (m === null || m === undefined) continue;
      paths.add(ROOT);
      for (let at = m.indexOf("."); at >= 0; at = m.indexOf(".", at + 1)) paths.add(m.slice(0, at));
      paths.add(m);
    }
    return paths;
  };
  const bump = (modules, what) => {
    for (const path of within(modules)) {
      if (!counts.has(path)) counts.set(path, { ...NONE });
      counts.get(path)[what] += 1;
    }
  };
  for (const n of index.nodes) bump([n.module], "nodes");
  for (const b of index.buffers) bump(b.modules, "buffers");
  for (const k of index.kernels) bump(k.modules, "kernels");
  return counts;
}

export class ModulesPane extends Pane {
  id = "modules";
  title = "Modules";
  stages = ["capture", "lowering", "scheduling"];
  placeholder = "The model's modules appear here after capture.";

  constructor(ctx) {
    super(ctx, "div.pane-body.modules-pane");
    this.rows = new Map(); // path -> row element
    this.reset();
  }

  forget() {
    this.rows.clear();
    this.chosen = null;
  }

  /** @param {Trace} trace */
  render(trace) {
    const index = this.ctx.index();
    this.rows.clear();
    if (!index.modules.size) {
      const graphs = trace.graphs("capture").length;
      clear(this.el, empty(graphs ? "No nn.Module ran in the captured graphs: a plain function."
        : this.placeholder));
      return false;
    }
    const entries = [[ROOT, trace.data("source")?.entry ?? "model"], ...index.modules];
    const counts = countsByModule(index);
    this.tree = h("div.module-tree", { role: "tree" },
      entries.map(([path, type]) => this.row(path, type, counts.get(path) ?? NONE)));
    this.details = h("div.module-details");
    clear(this.el, h("div.module-head", h("b", `${index.modules.size} modules`),
      h("span.hint", "click a module to list its nodes, buffers and kernels")),
    this.tree, this.details);
    if (this.chosen !== null && this.rows.has(this.chosen)) this.showDetails(this.chosen);
    this.select(this.ctx.current());
    return true;
  }

  row(path, type, { nodes, buffers, kernels }) {
    const depth = path === ROOT ? 0 : path.split(".").length;
    const name = path === ROOT ? type : path.slice(path.lastIndexOf(".") + 1);
    const el = h("div.module-row", { role: "treeitem", dataset: { module: path },
      style: { "--depth": depth }, title: path || "the compiled module" },
    h("span.mname", name), h("span.mtype", path === ROOT ? "(compiled)" : type),
    h("span.mpath", path), h("span.mcount", `${nodes} nodes · ${buffers} buffers · ${kernels} kernels`));
    el.addEventListener("mouseenter", () => this.ctx.hover(fromModule(this.ctx.index(), path)));
    el.addEventListener("mouseleave", () => this.ctx.unhover());
    el.addEventListener("click", () => {
      this.chosen = path;
      this.ctx.pin(fromModule(this.ctx.index(), path));
      this.showDetails(path);
      el.scrollIntoView({ block: "nearest" });  // the details took the tree's lower part
    });
    this.rows.set(path, el);
    return el;
  }

  // The chosen module's nodes, buffers and kernels, each a link to its own provenance.
  showDetails(path) {
    const index = this.ctx.index();
    const sel = fromModule(index, path);
    const item = (label, pick, extra) => h("li", { onmouseenter: () => this.ctx.hover(pick()),
      onmouseleave: () => this.ctx.unhover(), onclick: () => this.ctx.pin(pick()) },
    h("code", label), extra ? h("span.meta", extra) : null);
    const nodes = index.nodes.filter((n) => sel.nodes.has(`${n.gid}:${n.name}`));
    const buffers = index.buffers.filter((b) => sel.buffers.has(`${b.gid}:${b.name}`));
    const kernels = index.kernels.filter((k) => sel.kernels.has(`${k.gid}:${k.name}`));
    const gtag = (x) => (this.graphCount(index) > 1 ? `graph ${x.gid} · ` : "");
    clear(this.details,
      h("h4", path || "(the compiled module)", index.modules.get(path) ? badge(index.modules.get(path)) : null),
      h("section.module-list", { dataset: { list: "kernels" } }, h("b", `${kernels.length} kernels`),
        h("ul", kernels.map((k) => item(k.name, () => fromKernel(index, k.gid, k.name),
          `${gtag(k)}${k.module === null ? "" : k.module || "(root)"}`)))),
      h("section.module-list", { dataset: { list: "buffers" } }, h("b", `${buffers.length} buffers`),
        h("ul", buffers.map((b) => item(b.name, () => fromBuffer(index, b.gid, b.name),
          `${gtag(b)}${b.origins.join(", ")}`)))),
      h("section.module-list", { dataset: { list: "nodes" } }, h("b", `${nodes.length} FX nodes`),
        h("ul", nodes.map((n) => item(n.name, () => fromNode(index, n.gid, n.name),
          `${gtag(n)}${n.module}${n.line ? ` · line ${n.line}` : ""}`)))));
  }

  graphCount(index) {
    return new Set(index.nodes.map((n) => n.gid)).size;
  }

  select(sel) {
    for (const [path, el] of this.rows) {
      el.classList.toggle("hl", sel.modules.has(path));
      el.classList.toggle("chosen", path === this.chosen);
    }
  }
}
