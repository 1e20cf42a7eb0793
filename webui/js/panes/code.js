// Code pane: every generated kernel (Triton or C++) and each graph's Python wrapper, with
// line numbers. Each kernel line carries the colour of the user line it came from
// (codegen line_map); hovering it selects that line's provenance, and lines selected
// elsewhere are marked here with the `hl` class. With the pane focused, the arrow keys
// walk the kernel lines and select each one's provenance (Escape clears). Where the
// compile event carries a kernel's own lower stages (Triton's TTIR, TTGIR, LLVM IR, PTX,
// SASS; the C++ kernels' assembly), buttons in its header show one beside the source;
// with the stage's `line_maps`, its lines carry their kernel line's colour, and hovering
// (or walking with the keys) a line of either side marks the lines of the other.

import { h, clear, badge, fmtMs } from "../dom.js";
import { codeBlock } from "../codeview.js";
import {
  lineColour, fromKernelLine, fromWrapperLine, fromKernel, fromStageLine, fromModule,
} from "../provenance.js";
import { Pane } from "./pane.js";

/** @typedef {import("../trace.js").Trace} Trace */
/** @typedef {import("../../types/events").StageName} StageName */

// A kernel's lower stages, as the compile event may carry them (`asm` or `stages`), in
// the order the compiler makes them, with the highlighter each one reads best with.
const LOWER_STAGES = [
  ["ttir", "TTIR", "text"], ["ttgir", "TTGIR", "text"], ["llir", "LLVM IR", "llvm"],
  ["ptx", "PTX", "ptx"], ["sass", "SASS", "asm"], ["asm", "assembly", "objdump"],
  ["objdump", "objdump -d", "objdump"],
];

// A model's code is tens of thousands of lines: the first EAGER_LINES are drawn at once,
// each later kernel's code when it scrolls near the view (an IntersectionObserver), in a
// placeholder as tall as its lines (LINE_PX, css/code.css: 12.5px x 1.55).
const EAGER_LINES = 200;
const LINE_PX = 19.375;
const NEAR = "800px 0px";
// Each section is skipped by style and layout while off screen (`content-visibility: auto`,
// css/code.css), as tall as this estimate until it has been drawn once: a model's 400
// sections made one layout of 100-280 ms (CDP trace, load 7-22) in the frame after the open.
const HEAD_PX = 57; // a kernel's head (its meta wraps at the usual pane width), border and bar

export class CodePane extends Pane {
  id = "code";
  title = "Code";
  // The kernels with codegen; then their builds, times and offline GPU stages.
  stages = ["codegen", "compile", "profile", "gpu_stages"];
  placeholder = "Generated kernels appear here after codegen.";

  constructor(ctx) {
    super(ctx, "div.pane-body.code-pane");
    this.el.tabIndex = 0;
    this.el.setAttribute("aria-label", "Generated code: arrow keys walk the kernel lines");
    this.el.addEventListener("keydown", (e) => this.key(e));
    this.lines = new Map();   // "gid:kernel:line" / "gid:wrapper:line" -> element
    this.headers = new Map(); // "gid:kernel" -> header element
    this.sections = new Map(); // "gid:kernel" -> its section (kernels with code only)
    this.cursor = -1;
    this.reset();
  }

  // Up/Down (and j/k) move through the lines that have provenance (kernel, wrapper and
  // shown stage lines, in page order), pinning each.
  key(e) {
    const step = { ArrowDown: 1, ArrowUp: -1, j: 1, k: -1 }[e.key];
    if (!step) return;
    e.preventDefault();
    const rows = [...this.el.querySelectorAll(".cl")].filter((r) => r.pick);
    if (!rows.length) return;
    const at = rows.findIndex((r) => r.classList.contains("cursor"));
    this.cursor = Math.max(0, Math.min(rows.length - 1, (at < 0 ? this.cursor : at) + step));
    for (const r of this.el.querySelectorAll(".cl.cursor")) r.classList.remove("cursor");
    const row = rows[this.cursor];
    row.classList.add("cursor");
    row.scrollIntoView({ block: "nearest" });
    this.ctx.pin(row.pick());
  }

  // Hover, click and the keys select `pick()` for this row.
  provenance(row, pick) {
    row.pick = pick;
    row.addEventListener("mouseenter", () => this.ctx.hover(pick()));
    row.addEventListener("mouseleave", () => this.ctx.unhover());
    row.addEventListener("click", () => this.ctx.pin(pick()));
  }

  forget() {
    this.lines.clear();
    this.headers.clear();
    this.sections.clear();
    this.lazy = new Map(); // "gid:kernel" / "gid:wrapper" -> draws that section's code
    this.observer?.disconnect();
    this.observer = null;
    this.budget = EAGER_LINES;
    this.compiled = new Map(); // "gid:kernel" -> its compile entry (lower stages)
    this.stageRows = new Map(); // "gid:kernel:stage:line" -> element of a shown stage
    this.marked = [];
    this.cursor = -1;
  }

  /** @param {Trace} trace @param {StageName} stage */
  handles(trace, stage) {
    return stage === "codegen" || (this.stages.includes(stage) && trace.has("codegen"));
  }

  /** @param {Trace} trace @param {StageName} stage */
  render(trace, stage) {
    if (stage === "codegen") this.drawKernels(trace);
    if (stage === "compile" || stage === "profile") this.badges(trace);
    if (stage === "compile" || (stage === "gpu_stages" && trace.has("compile"))) {
      this.lowerStages(trace);
    }
    return true;
  }

  /** @param {Trace} trace */
  drawKernels(trace) {
    this.lines.clear();
    this.headers.clear();
    this.sections.clear();
    this.stageRows.clear();
    this.lazy.clear();
    this.observer?.disconnect();
    this.observer = typeof IntersectionObserver === "function"
      ? new IntersectionObserver((entries) => this.near(entries), { rootMargin: NEAR }) : null;
    this.budget = EAGER_LINES;
    const sections = [];
    for (const g of trace.graphs("codegen")) {
      // Execution order (scheduling), with extern calls in place; then anything unscheduled.
      // Kernels group by module: a heading starts each run of kernels of one module.
      const generated = new Map(g.kernels.map((k) => [k.name, k]));
      let group;
      for (const k of trace.graph("scheduling", g.id)?.kernels ?? []) {
        const module = k.module ?? null;
        if (module !== null && (group === undefined || module !== group)) {
          sections.push(this.moduleHeading(g.id, module, k.modules ?? []));
        }
        group = module;
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
    clear(this.el, this.toc(trace), sections);
    this.badges(trace);
  }

  // The kernel index, on top of the pane as it scrolls (a few rows high; it scrolls
  // itself): a chip per kernel, in runs under their module's path where the trace has them.
  /** @param {Trace} trace */
  toc(trace) {
    const runs = [];
    for (const g of trace.graphs("codegen")) {
      const modules = new Map((trace.graph("scheduling", g.id)?.kernels ?? [])
        .map((k) => [k.name, k.module ?? null]));
      for (const k of g.kernels) {
        const module = modules.get(k.name) ?? null;
        const chip = h("a.chip", { href: "#", style: { "--kc": this.ctx.kernelColour(g.id, k.name) },
          onclick: (e) => { e.preventDefault(); this.reveal(`${g.id}:${k.name}`); } }, k.name);
        const last = runs.at(-1);
        if (last && last.gid === g.id && last.module === module) last.chips.push(chip);
        else runs.push({ gid: g.id, module, chips: [chip] });
      }
    }
    if (!runs.some((r) => r.module !== null)) return h("div.toc", runs.flatMap((r) => r.chips));
    return h("div.toc.grouped", runs.map((r) => h("div.toc-run",
      h("span.module-path", r.module === null ? "" : r.module || "(root)"), r.chips)));
  }

  // The heading of a run of kernels that lie in one module (hover/click: the module).
  moduleHeading(gid, module, modules) {
    const type = this.ctx.index().modules.get(module);
    const spans = modules.length > 1 && !modules.includes(module)
      ? ` · spans ${modules.join(", ")}` : "";
    const el = h("div.module-group", { dataset: { module, graph: gid } },
      h("span.module-path", module || "(root)"), type ? h("span.mtype", type) : null,
      h("span.hint", spans));
    el.addEventListener("mouseenter", () => this.ctx.hover(fromModule(this.ctx.index(), module)));
    el.addEventListener("mouseleave", () => this.ctx.unhover());
    el.addEventListener("click", () => this.ctx.pin(fromModule(this.ctx.index(), module)));
    return el;
  }

  header(gid, name, kind, extra) {
    const key = `${gid}:${name}`;
    const perf = h("span.perf");
    const el = h("div.kernel-head", { style: { "--kc": this.ctx.kernelColour(gid, name) } },
      h("span.swatch"), h("span.kname", name), kind && badge(kind), h("span.meta", extra), perf);
    el.perf = perf; // badges() writes it for every header, three times in an open
    el.addEventListener("mouseenter", () => this.ctx.hover(fromKernel(this.ctx.index(), gid, name)));
    el.addEventListener("mouseleave", () => this.ctx.unhover());
    el.addEventListener("click", () => this.ctx.pin(fromKernel(this.ctx.index(), gid, name)));
    this.headers.set(key, el);
    return el;
  }

  /** @param {number} gid @param {import("../../types/events").GeneratedKernel} kernel */
  kernelSection(gid, kernel) {
    const byLine = new Map((kernel.line_map ?? []).map((e) => [e.line, e]));
    const scheduled = this.ctx.index().kernels.find((k) => k.gid === gid && k.name === kernel.name);
    const where = scheduled?.module ? ` · ${scheduled.module}` : "";
    const meta = scheduled ? `lines ${scheduled.lines.join(", ") || "–"}${where}` : "";
    const section = h("section.kernel", { dataset: { kernel: kernel.name, graph: gid } },
      this.header(gid, kernel.name, kernel.target, meta), h("div.stage-bar"));
    this.sections.set(`${gid}:${kernel.name}`, section);
    return this.withCode(section, `${gid}:${kernel.name}`, kernel.source,
      () => this.kernelBlock(gid, kernel, byLine));
  }

  // Draws the code now, within the budget of eager lines, else when it nears the view.
  withCode(section, key, source, draw) {
    const lines = source.split("\n").length;
    const place = (late = true) => {
      this.lazy.delete(key);
      this.observer?.unobserve(holder);
      const block = draw();
      holder.replaceWith(block);
      const entry = this.compiled.get(key);
      if (entry) this.stageBar(entry.gid, entry.kernel, section);
      if (late) this.select(this.ctx.current());
      return block;
    };
    const holder = h("div.code-lazy", { style: { height: `${lines * LINE_PX + 12}px` } });
    section.append(holder);
    section.style.setProperty("--est", `${HEAD_PX + lines * LINE_PX + 12}px`);
    if (this.budget >= lines || !this.observer) {
      this.budget -= lines;
      place(false);
    } else {
      this.budget = 0;
      holder.place = place;
      this.lazy.set(key, place);
      this.observer.observe(holder);
    }
    return section;
  }

  near(entries) {
    for (const e of entries) if (e.isIntersecting) e.target.place?.();
  }

  // Draws the lazy section a key of the selection lies in ("0:k:7" or "0:k").
  draw(key) {
    const parts = key.split(":");
    this.lazy.get(`${parts[0]}:${parts[1]}`)?.();
  }

  kernelBlock(gid, kernel, byLine) {
    return codeBlock(kernel.source, kernel.language, (n, row) => {
      const entry = byLine.get(n);
      const key = `${gid}:${kernel.name}:${n}`;
      this.lines.set(key, row);
      row.dataset.key = key;
      if (!entry || !entry.lines?.length) return;
      row.classList.add("pv");
      row.style.setProperty("--pc", lineColour(entry.lines[0]));
      row.title = `line ${entry.lines.join(", ")} · ${entry.origins?.join(", ") ?? ""}` +
        (kernel.module ? ` · ${kernel.module}` : "");
      this.provenance(row, () => fromKernelLine(this.ctx.index(), gid, kernel.name, n));
    }, this.ctx.highlight);
  }

  /** @param {number} gid @param {import("../../types/events").ScheduledKernel} k */
  externSection(gid, k) {
    return h("section.kernel.extern", { dataset: { kernel: k.name, graph: gid } },
      this.header(gid, k.name, "extern",
        `calls ATen for ${k.origins.join(", ")} · lines ${k.lines.join(", ") || "–"}` +
        (k.module ? ` · ${k.module}` : "")));
  }

  /** @param {number} gid @param {import("../../types/events").Wrapper} wrapper */
  wrapperSection(gid, wrapper) {
    const byLine = new Map((wrapper.line_map ?? []).map((e) => [e.line, e]));
    const section = h("section.kernel.wrapper", { dataset: { graph: gid } },
      h("div.kernel-head", h("span.kname", `wrapper · graph ${gid}`), badge("Python")));
    return this.withCode(section, `${gid}:wrapper`, wrapper.source,
      () => this.wrapperBlock(gid, wrapper, byLine));
  }

  wrapperBlock(gid, wrapper, byLine) {
    return codeBlock(wrapper.source, "python", (n, row) => {
      const key = `${gid}:wrapper:${n}`;
      this.lines.set(key, row);
      row.dataset.key = key;
      const entry = byLine.get(n);
      if (!entry) return;
      row.classList.add("pv", "kcall");
      row.style.setProperty("--pc", this.ctx.kernelColour(gid, entry.kernel));
      this.provenance(row, () => fromWrapperLine(this.ctx.index(), gid, n));
    }, this.ctx.highlight);
  }

  // Compile and profile numbers in the kernel headers. The compile stage's per-kernel
  // time is the first launch (for Triton it includes the JIT compile), not a build.
  /** @param {Trace} trace */
  badges(trace) {
    const compiled = new Map(trace.graphs("compile").flatMap((g) =>
      g.kernels.map((k) => [`${g.id}:${k.name}`, k])));
    const profiled = new Map((trace.data("profile")?.kernels ?? []).map((k) => [k.name, k]));
    for (const [key, el] of this.headers) {
      const name = key.slice(key.indexOf(":") + 1);
      const c = compiled.get(key);
      const p = profiled.get(name);
      const parts = [];
      if (c?.ms !== undefined && c.ms !== null) {
        parts.push(`first launch ${fmtMs(c.ms)}${c.cache_hit ? " (cached build)" : ""}`);
      }
      if (c?.registers !== undefined && c.registers !== null) parts.push(`${c.registers} regs`);
      if (c?.spills) parts.push(`${c.spills} spills`);
      if (p?.ms !== undefined && p.ms !== null) parts.push(`runs ${fmtMs(p.ms)}`);
      const text = parts.join(" · ");
      if (el.perf.textContent !== text) el.perf.textContent = text;
    }
  }

  // Buttons for each lower stage a kernel's compile entry carries; the source stays first
  // and stays shown: a stage opens beside it.
  /** @param {Trace} trace */
  lowerStages(trace) {
    for (const g of trace.graphs("compile")) {
      for (const k of g.kernels ?? []) {
        const key = `${g.id}:${k.name}`;
        this.compiled.set(key, { gid: g.id, kernel: k });
        if (this.lazy.has(key)) continue; // its bar is made when its code is drawn
        const section = this.sections.get(key);
        if (section) this.stageBar(g.id, k, section);
      }
    }
  }

  /** @param {number} gid @param {any} k @param {HTMLElement} section */
  stageBar(gid, k, section) {
    const stages = k.ir ?? {};
    const present = LOWER_STAGES.filter(([key]) => typeof stages[key] === "string" && stages[key]);
    const facts = [["num_warps", "warps"], ["num_stages", "stages"], ["registers", "registers"],
      ["spills", "spills"], ["shared_bytes", "shared bytes"]]
      .filter(([key]) => k[key] !== undefined && k[key] !== null)
      .map(([key, label]) => `${label} ${k[key]}`);
    const bar = section?.querySelector(".stage-bar");
    if (bar && !present.length && k.stages_note) {
      clear(bar, h("span.stages-note", `no lower stages: ${k.stages_note}`));
    }
    if (!bar || (!present.length && !facts.length)) return;
    const source = section.querySelector(".code");
    this.stageSourceRows(gid, k.name, source);
    let shown = null; // the split showing a stage, or null (the source alone)
    const show = (button, key, language) => {
      for (const b of bar.querySelectorAll("button")) b.classList.toggle("active", b === button);
      this.dropStageRows(gid, k.name);
      const split = key === null ? null : h("div.stage-split",
        h("div.stage-src"), this.stageBlock(gid, k.name, key, stages[key], language));
      if (split) {
        split.dataset.stage = key;
        (shown ?? source).replaceWith(split);
        split.firstChild.append(source);
      } else if (shown) {
        shown.replaceWith(source);
      }
      shown = split;
      this.select(this.ctx.current());
    };
    const sourceButton = h("button.sbtn.active", { type: "button" }, "source");
    sourceButton.addEventListener("click", () => show(sourceButton, null));
    clear(bar, sourceButton, present.map(([key, label, language]) => {
      const b = h("button.sbtn", { type: "button", dataset: { stage: key } }, label);
      if (k.line_maps?.[key]?.length) b.title = `${label} beside the source, lines mapped`;
      b.addEventListener("click", () => show(b, key, language));
      return b;
    }), facts.length ? h("span.facts", facts.join(" · ")) : null,
    k.gpu_target ? h("span.offline-target", {
      title: "This host has no GPU: Triton's interpreter ran the kernel, and Triton " +
        `compiled it again for ${k.gpu_target} for these stages (gpu_target option)` },
    `compiled for ${k.gpu_target}, not run here`) : null);
  }

  // Kernel lines that only a stage's line map reaches (no user line) still select.
  stageSourceRows(gid, kernel, source) {
    const index = this.ctx.index();
    for (const [n, row] of source.lineEls ?? []) {
      if (!row.pick && index.byKline.has(`${gid}:${kernel}:${n}`)) {
        row.classList.add("sv");
        this.provenance(row, () => fromKernelLine(this.ctx.index(), gid, kernel, n));
      }
    }
  }

  stageBlock(gid, kernel, stage, text, language) {
    const index = this.ctx.index();
    const colours = new Map((index.klines ?? []).filter((e) => e.gid === gid && e.kernel === kernel)
      .map((e) => [e.line, e.lines[0]]));
    const block = codeBlock(text, language, (n, row) => {
      const key = `${gid}:${kernel}:${stage}:${n}`;
      const klines = index.stageLines.get(key);
      if (!klines) return;
      this.stageRows.set(key, row);
      row.classList.add("sv");
      const user = klines.map((l) => colours.get(l)).find((l) => l !== undefined);
      if (user !== undefined) row.style.setProperty("--pc", lineColour(user));
      row.title = `kernel line ${klines.join(", ")}`;
      this.provenance(row, () => fromStageLine(this.ctx.index(), gid, kernel, stage, n));
    }, this.ctx.highlight);
    block.classList.add("stage-code");
    return block;
  }

  dropStageRows(gid, kernel) {
    const prefix = `${gid}:${kernel}:`;
    for (const key of [...this.stageRows.keys()]) {
      if (key.startsWith(prefix)) this.stageRows.delete(key);
    }
  }

  reveal(key) {
    this.draw(key);
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
    for (const el of this.el.querySelectorAll(".module-group")) {
      if (sel.modules?.has(el.dataset.module)) this.marked.push(el);
    }
    const stageMarked = [];
    for (const key of sel.slines ?? []) {
      const el = this.stageRows.get(key);
      if (el) stageMarked.push(el);
    }
    this.marked.push(...stageMarked);
    for (const el of this.marked) el.classList.add("hl");
    revealInBlocks(this.marked);
  }

  // On a click in the editor, bring the first marked kernel line into view.
  scrollToSelection() {
    const [key] = this.ctx.current().klines ?? [];
    if (key && !this.lines.has(key)) this.draw(key);
    const first = this.marked.find((el) => el.classList.contains("cl"));
    first?.scrollIntoView({ block: "center", behavior: "smooth" });
  }
}

// Scrolls each side of a shown stage (its own scroll box) to its first marked line,
// leaving the page where it is.
function revealInBlocks(rows) {
  const seen = new Set();
  for (const row of rows) {
    const block = row.closest(".stage-code, .stage-src");
    if (!block || seen.has(block)) continue;
    seen.add(block);
    const top = row.offsetTop; // the box is the rows' offset parent (position: relative)
    if (top < block.scrollTop || top > block.scrollTop + block.clientHeight - row.offsetHeight) {
      block.scrollTop = Math.max(0, top - block.clientHeight / 3);
    }
  }
}
