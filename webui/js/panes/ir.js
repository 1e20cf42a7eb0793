// IR pane: every buffer lowering produced (lowering.graphs[].buffers) as a card with its
// expression tree drawn as a tree, its text form, the indices it reads and writes, and why
// it was realized; plus the ops that fell back to ATen.

import { h, clear, badge, shape, growing } from "../dom.js";
import { treeSvg } from "./irtree.js";
import { lineColour, fromBuffer, fromNode } from "../provenance.js";
import { Pane } from "./pane.js";

/** @typedef {import("../trace.js").Trace} Trace */
/** @typedef {import("../../types/events").StageName} StageName */

// A model has thousands of buffers: the first EAGER_CARDS cards are drawn whole at once,
// the others as their head, with the body drawn when the card nears the view.
const EAGER_CARDS = 12;
// Cards made with the pane, of each graph; the rest as they near the view.
const FIRST_CARDS = 40;

export class IrPane extends Pane {
  id = "ir";
  title = "IR";
  stages = ["lowering", "scheduling"];
  placeholder = "IR buffers appear here after lowering.";

  constructor(ctx) {
    super(ctx, "div.pane-body.ir-pane");
    this.cards = new Map();
    this.reset();
  }

  forget() {
    this.cards.clear();
  }

  // Scheduling marks the cards' kernels once lowering has drawn them.
  /** @param {Trace} trace @param {StageName} stage */
  handles(trace, stage) {
    return stage === "lowering" || (stage === "scheduling" && trace.has("lowering"));
  }

  /** @param {Trace} trace */
  render(trace) {
    this.cards.clear();
    this.observer?.disconnect();
    this.observer = typeof IntersectionObserver === "function"
      ? new IntersectionObserver((entries) => {
        for (const e of entries) if (e.isIntersecting) /** @type {any} */ (e.target).place?.();
      }, { rootMargin: "600px 0px" }) : null;
    this.budget = EAGER_CARDS;
    const kernelOf = new Map(trace.kernels().flatMap((k) =>
      k.buffers.map((b) => [`${k.gid}:${b}`, k.name])));
    const removed = new Set(trace.graphs("scheduling").flatMap((g) =>
      (g.removed_buffers ?? []).map((b) => `${g.id}:${b}`)));
    this.lists = [];
    const sections = trace.graphs("lowering").map((g) => {
      const section = h("section.ir-graph",
        h("h3", `Graph ${g.id}`, h("span.legend", h("i.load"), "load", h("i.const"), "constant",
          h("i.op"), "op"), h("span.hint",
          `inputs ${g.inputs.map((i) => `${i.name} ${shape(i.size)}`).join(", ")} · ` +
          `outputs ${g.outputs.join(", ")}`)),
        this.fallbacks(g));
      // A model's graph has hundreds of buffers: their cards are made as they are read.
      const control = {};
      this.lists.push(control);
      return growing(section, g.buffers, (b) => this.card(g.id, b,
        kernelOf.get(`${g.id}:${b.name}`), removed.has(`${g.id}:${b.name}`)),
      (left) => h("div.ir-more.hint", `${left} more buffers…`),
      { first: FIRST_CARDS, drawn: () => this.select(this.ctx.current()), control });
    });
    clear(this.el, sections);
    this.select(this.ctx.current());
    return true;
  }

  /** @param {import("../../types/events").LoweringGraph} g */
  fallbacks(g) {
    const list = g.fallbacks ?? [];
    if (!list.length) return h("div.fallbacks.none", "No op fell back to ATen.");
    return h("div.fallbacks", h("b", `${list.length} op${list.length > 1 ? "s" : ""} fell back to ATen`),
      h("ul", list.map((f) => h("li", h("code", f.op), ` (node ${f.node}, line ${f.line ?? "?"}` +
        `${f.buffer ? `, ${f.buffer}` : ""})`))));
  }

  /** @param {number} gid @param {import("../../types/events").Buffer} b */
  card(gid, b, kernel, removed) {
    const select = () => fromBuffer(this.ctx.index(), gid, b.name);
    const nodeSel = (origin) => origin ? fromNode(this.ctx.index(), gid, origin) : select();
    const head = h("div.card-head",
      h("span.bname", b.name), badge(b.kind, b.kind),
      h("span.meta", `${b.dtype} ${shape(b.size)} stride ${shape(b.stride)}`),
      b.module ? h("span.module-path", { title: "module" }, b.module) : null,
      b.reduction_type ? badge(`${b.reduction_type} over ${shape(b.reduction_ranges)}`) : null,
      kernel ? h("span.chip", { style: { "--kc": this.ctx.kernelColour(gid, kernel) } }, kernel) : null,
      removed ? badge("never stored", "ok") : null);
    head.addEventListener("mouseenter", () => this.ctx.hover(select()));
    head.addEventListener("mouseleave", () => this.ctx.unhover());
    head.addEventListener("click", () => this.ctx.pin(select()));
    const card = h("article.ir-card", { dataset: { buffer: b.name, graph: gid } }, head);
    if (b.lines?.length) card.style.setProperty("--pc", lineColour(b.lines[0]));
    this.cards.set(`${gid}:${b.name}`, card);
    const place = () => {
      card.place = null;
      this.observer?.unobserve(card);
      card.append(this.cardBody(b, nodeSel));
      delete card.dataset.lazy;
      this.selectCard(`${gid}:${b.name}`, card, this.ctx.current());
    };
    if (this.budget-- > 0 || !this.observer) {
      place();
    } else {
      card.dataset.lazy = "true";
      card.place = place;
      this.observer.observe(card);
    }
    return card;
  }

  /** @param {import("../../types/events").Buffer} b */
  cardBody(b, nodeSel) {
    const tree = b.tree
      ? h("div.tree-wrap", treeSvg(b.tree,
        (origin) => origin ? this.ctx.hover(nodeSel(origin)) : this.ctx.unhover(),
        (origin) => this.ctx.pin(nodeSel(origin))))
      : h("div.tree-wrap.none", b.extern ? `ATen call: ${b.extern.op}(${/** @type {string[]} */ (b.extern.args ?? []).join(", ")})`
        : "no expression tree");
    const facts = h("table.kv",
      h("tr", h("th", "realized"), h("td", b.realized ?? "–")),
      h("tr", h("th", "FX nodes"), h("td", (b.origins ?? []).join(", ") || "–")),
      h("tr", h("th", "module"), h("td", b.module === null || b.module === undefined ? "–"
        : h("code.module-path", b.module || "(root)"))),
      h("tr", h("th", "lines"), h("td", (b.lines ?? []).map((l) =>
        h("span.line-chip", { style: { "--pc": lineColour(l) } }, l)))),
      h("tr", h("th", "ranges"), h("td", `${shape(b.ranges)}${b.reduction_ranges?.length
        ? ` × ${shape(b.reduction_ranges)}` : ""}`)),
      h("tr", h("th", "writes"), h("td", h("code", b.write_index ?? "–"))),
      (b.reads ?? []).map((r, i) => h("tr", h("th", i ? "" : "reads"),
        h("td", h("code", `${r.buffer}[${r.index}]`)))));
    return h("div.card-body", tree, h("div.card-side", facts, h("pre.ir-text", b.text ?? "")));
  }

  select(sel) {
    for (const [key, card] of this.cards) this.selectCard(key, card, sel);
  }

  selectCard(key, card, sel) {
    const on = sel.buffers.has(key);
    const was = card.classList.contains("hl");
    card.classList.toggle("hl", on);
    // A card's tree nodes are marked only while the card is (a model has thousands).
    if (!on && !was) return;
    const gid = card.dataset.graph;
    for (const g of card.querySelectorAll("g.tn")) {
      g.classList.toggle("hl", on && !!g.dataset.origin && sel.nodes.has(`${gid}:${g.dataset.origin}`));
    }
  }

  scrollToSelection() {
    const marked = () => [...this.cards.values()].find((c) => c.classList.contains("hl"));
    if (!marked()) for (const list of this.lists ?? []) list.all?.();  // past the drawn cards
    const card = marked();
    card?.place?.();
    card?.scrollIntoView({ block: "nearest", behavior: "smooth" });
  }
}
