// Code pane: every generated kernel (Triton or C++) and each graph's Python wrapper, with
// line numbers. Each kernel line carries the colour of the user line it came from
// (codegen line_map); hovering it selects that line's provenance, and lines selected
// elsewhere are marked here with the `hl` class.

import { h, clear, empty, badge, fmtMs } from "../dom.js";
import { codeBlock } from "../codeview.js";
import { lineColour, fromKernelLine, fromWrapperLine, fromKernel } from "../provenance.js";

export class CodePane {
  id = "code";
  title = "Code";

  constructor(ctx) {
    this.ctx = ctx;
    this.el = h("div.pane-body.code-pane");
    this.lines = new Map();   // "gid:kernel:line" / "gid:wrapper:line" -> element
    this.headers = new Map(); // "gid:kernel" -> header element
    this.reset();
  }

  reset() {
    this.lines.clear();
    this.headers.clear();
    this.marked = [];
    delete this.el.dataset.filled;
    clear(this.el, empty("Generated kernels appear here after codegen."));
  }

  update(trace, stage) {
    if (stage === "codegen") this.render(trace);
    if ((stage === "compile" || stage === "profile") && trace.has("codegen")) this.badges(trace);
  }

  render(trace) {
    this.lines.clear();
    this.headers.clear();
    const sections = [];
    for (const g of trace.graphs("codegen")) {
      // Execution order (scheduling), with extern calls in place; then anything unscheduled.
      const generated = new Map(g.kernels.map((k) => [k.name, k]));
      for (const k of trace.graph("scheduling", g.id)?.kernels ?? []) {
        if (generated.has(k.name)) {
          sections.push(this.kernelSection(g.id, generated.get(k.name)));
          generated.delete(k.name);
        } else if (k.kind === "extern") {
          sections.push(this.externSection(g.id, k));
        }
      }
      for (const k of generated.values()) sections.push(this.kernelSection(g.id, k));
      if (g.wrapper) sections.push(this.wrapperSection(g.id, g.wrapper));
    }
    const toc = h("div.toc", trace.graphs("codegen").flatMap((g) => g.kernels.map((k) =>
      h("a.chip", { href: "#", style: { "--kc": this.ctx.kernelColour(g.id, k.name) },
        onclick: (e) => { e.preventDefault(); this.reveal(`${g.id}:${k.name}`); } }, k.name))));
    clear(this.el, toc, sections);
    this.el.dataset.filled = "true";
    this.badges(trace);
  }

  header(gid, name, kind, extra) {
    const key = `${gid}:${name}`;
    const el = h("div.kernel-head", { style: { "--kc": this.ctx.kernelColour(gid, name) } },
      h("span.swatch"), h("span.kname", name), kind && badge(kind), h("span.meta", extra),
      h("span.perf"));
    el.addEventListener("mouseenter", () => this.ctx.hover(fromKernel(this.ctx.index(), gid, name)));
    el.addEventListener("mouseleave", () => this.ctx.unhover());
    el.addEventListener("click", () => this.ctx.pin(fromKernel(this.ctx.index(), gid, name)));
    this.headers.set(key, el);
    return el;
  }

  kernelSection(gid, kernel) {
    const byLine = new Map((kernel.line_map ?? []).map((e) => [e.line, e]));
    const scheduled = this.ctx.index().kernels.find((k) => k.gid === gid && k.name === kernel.name);
    const meta = scheduled ? `lines ${scheduled.lines.join(", ") || "–"}` : "";
    const block = codeBlock(kernel.source, kernel.language, (n, row) => {
      const entry = byLine.get(n);
      const key = `${gid}:${kernel.name}:${n}`;
      this.lines.set(key, row);
      row.dataset.key = key;
      if (!entry || !entry.lines?.length) return;
      row.classList.add("pv");
      row.style.setProperty("--pc", lineColour(entry.lines[0]));
      row.title = `line ${entry.lines.join(", ")} · ${entry.origins?.join(", ") ?? ""}`;
      row.addEventListener("mouseenter", () =>
        this.ctx.hover(fromKernelLine(this.ctx.index(), gid, kernel.name, n)));
      row.addEventListener("mouseleave", () => this.ctx.unhover());
      row.addEventListener("click", () =>
        this.ctx.pin(fromKernelLine(this.ctx.index(), gid, kernel.name, n)));
    });
    return h("section.kernel", { dataset: { kernel: kernel.name, graph: gid } },
      this.header(gid, kernel.name, kernel.target, meta), block);
  }

  externSection(gid, k) {
    return h("section.kernel.extern", { dataset: { kernel: k.name, graph: gid } },
      this.header(gid, k.name, "extern",
        `calls ATen for ${k.origins.join(", ")} · lines ${k.lines.join(", ") || "–"}`));
  }

  wrapperSection(gid, wrapper) {
    const byLine = new Map((wrapper.line_map ?? []).map((e) => [e.line, e]));
    const block = codeBlock(wrapper.source, "python", (n, row) => {
      const key = `${gid}:wrapper:${n}`;
      this.lines.set(key, row);
      row.dataset.key = key;
      const entry = byLine.get(n);
      if (!entry) return;
      row.classList.add("pv", "kcall");
      row.style.setProperty("--pc", this.ctx.kernelColour(gid, entry.kernel));
      row.addEventListener("mouseenter", () =>
        this.ctx.hover(fromWrapperLine(this.ctx.index(), gid, n)));
      row.addEventListener("mouseleave", () => this.ctx.unhover());
      row.addEventListener("click", () => this.ctx.pin(fromWrapperLine(this.ctx.index(), gid, n)));
    });
    return h("section.kernel.wrapper", { dataset: { graph: gid } },
      h("div.kernel-head", h("span.kname", `wrapper · graph ${gid}`), badge("Python")), block);
  }

  // Compile and profile numbers in the kernel headers.
  badges(trace) {
    const compiled = new Map(trace.graphs("compile").flatMap((g) =>
      g.kernels.map((k) => [`${g.id}:${k.name}`, k])));
    const profiled = new Map((trace.data("profile")?.kernels ?? []).map((k) => [k.name, k]));
    for (const [key, el] of this.headers) {
      const name = key.slice(key.indexOf(":") + 1);
      const c = compiled.get(key);
      const p = profiled.get(name);
      const parts = [];
      if (c) parts.push(`built ${fmtMs(c.ms)}${c.cache_hit ? " (cached)" : ""}`);
      if (c?.registers !== undefined) parts.push(`${c.registers} regs`);
      if (p) parts.push(`runs ${fmtMs(p.ms)}`);
      el.querySelector(".perf").textContent = parts.join(" · ");
    }
  }

  reveal(key) {
    const el = this.headers.get(key) ?? this.lines.get(key);
    el?.scrollIntoView({ block: "start", behavior: "smooth" });
  }

  select(sel) {
    for (const el of this.marked) el.classList.remove("hl");
    this.marked = [];
    for (const key of sel.klines) {
      const el = this.lines.get(key);
      if (el) this.marked.push(el);
    }
    for (const key of sel.kernels) {
      const el = this.headers.get(key);
      if (el) this.marked.push(el);
    }
    for (const el of this.marked) el.classList.add("hl");
  }

  // On a click in the editor, bring the first marked kernel line into view.
  scrollToSelection() {
    const first = this.marked.find((el) => el.classList.contains("cl"));
    first?.scrollIntoView({ block: "center", behavior: "smooth" });
  }
}
