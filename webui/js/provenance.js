// Provenance: which FX nodes, IR buffers, kernels and kernel lines come from which line of
// the user's code, and back. Built only from the ids docs/events.md defines (node `line`,
// buffer `lines`/`origins`, kernel `lines`/`origins`/`buffers`, codegen `line_map`).
//
// A selection is a set of keys per kind. Keys carry the graph id because FX node and
// buffer names are unique only within a graph: "0:add", "0:buf1", "0:kernel_name",
// kernel lines "0:kernel_name:7", wrapper lines "0:wrapper:12", and lines of a kernel's
// lower stages (Triton's PTX, SASS, ...; the C++ assembly) "0:kernel_name:ptx:40", which
// the compile event's `line_maps` tie to kernel lines. Modules are keyed by path alone
// ("blocks.1.attn": the same module in every graph), from node `module` and buffer and
// kernel `modules` (compiler/capture/modules.py).
//
// Colours follow Compiler Explorer: every source line that produced something gets a
// stable colour, used as a background for that line and everything that came from it.
// (Comma syntax for hsl(): cytoscape does not parse the space-separated form.)

/** @typedef {import("./trace.js").Trace} Trace */

const LINE_HUES = [210, 30, 140, 330, 60, 260, 170, 0, 95, 290];
const KERNEL_HUES = [200, 30, 130, 290, 350, 60, 170, 250, 100, 10];

export const lineColour = (line) => `hsl(${LINE_HUES[(line - 1) % LINE_HUES.length]}, 75%, 60%)`;
export const kernelColour = (i) => `hsl(${KERNEL_HUES[i % KERNEL_HUES.length]}, 65%, 55%)`;

export function emptySelection() {
  return { lines: new Set(), nodes: new Set(), buffers: new Set(), kernels: new Set(),
    klines: new Set(), slines: new Set(), modules: new Set() };
}

export const isEmpty = (sel) => !sel || Object.values(sel).every((s) => s.size === 0);

// Everything the selection functions need, flattened once per trace update.
/** @param {Trace} trace */
export function buildIndex(trace) {
  const index = { nodes: [], buffers: [], kernels: [], klines: [], wlines: [],
    kernelColour: new Map(), sourceLines: new Set(),
    modules: new Map(),     // path -> class name, every graph's modules in first-seen order
    stageLines: new Map(),  // "gid:kernel:stage:line" -> kernel lines
    byKline: new Map() };   // "gid:kernel:line" -> its stage line keys
  for (const g of trace.graphs("capture")) {
    for (const m of g.modules ?? []) if (!index.modules.has(m.path)) index.modules.set(m.path, m.type);
    for (const n of g.nodes) {
      index.nodes.push({ gid: g.id, name: n.name, line: n.line, module: n.module ?? null });
    }
  }
  for (const g of trace.graphs("lowering")) {
    for (const b of g.buffers) {
      index.buffers.push({ gid: g.id, name: b.name, lines: b.lines ?? [],
        origins: b.origins ?? [], module: b.module ?? null, modules: b.modules ?? [] });
    }
  }
  trace.kernels().forEach((k, i) => {
    index.kernels.push({ gid: k.gid, name: k.name, lines: k.lines ?? [],
      origins: k.origins ?? [], buffers: k.buffers ?? [], module: k.module ?? null,
      modules: k.modules ?? [] });
    index.kernelColour.set(`${k.gid}:${k.name}`, kernelColour(i));
  });
  for (const g of trace.graphs("codegen")) {
    for (const k of g.kernels) {
      for (const e of k.line_map ?? []) {
        index.klines.push({ gid: g.id, kernel: k.name, line: e.line, lines: e.lines ?? [],
          origins: e.origins ?? [], buffers: e.buffers ?? [] });
      }
    }
    for (const e of g.wrapper?.line_map ?? []) {
      index.wlines.push({ gid: g.id, line: e.line, kernel: e.kernel });
    }
  }
  for (const g of trace.graphs("compile")) {
    for (const k of g.kernels ?? []) {
      for (const [stage, spans] of Object.entries(k.line_maps ?? {})) {
        for (const s of spans) {
          for (let line = s.first; line <= s.last; line++) {
            const key = `${g.id}:${k.name}:${stage}:${line}`;
            index.stageLines.set(key, s.kernel_lines);
            for (const kl of s.kernel_lines) {
              const kkey = `${g.id}:${k.name}:${kl}`;
              if (!index.byKline.has(kkey)) index.byKline.set(kkey, []);
              index.byKline.get(kkey).push(key);
            }
          }
        }
      }
    }
  }
  for (const x of [...index.buffers, ...index.kernels, ...index.klines]) {
    x.lines.forEach((l) => index.sourceLines.add(l));
  }
  index.nodes.forEach((n) => n.line && index.sourceLines.add(n.line));
  return index;
}

function collect(index, { lines = [], nodes = [], buffers = [], kernels = [], klines = [],
  modules = [] }) {
  const sel = emptySelection();
  modules.forEach((m) => sel.modules.add(m));
  lines.forEach((l) => l !== null && l !== undefined && sel.lines.add(l));
  nodes.forEach((k) => sel.nodes.add(k));
  buffers.forEach((k) => sel.buffers.add(k));
  kernels.forEach((k) => sel.kernels.add(k));
  klines.forEach((k) => sel.klines.add(k));
  for (const k of sel.klines) (index.byKline.get(k) ?? []).forEach((s) => sel.slines.add(s));
  for (const w of index.wlines) {
    if (sel.kernels.has(`${w.gid}:${w.kernel}`)) sel.klines.add(`${w.gid}:wrapper:${w.line}`);
  }
  return sel;
}

const key = (x) => `${x.gid}:${x.name}`;
const klineKey = (x) => `${x.gid}:${x.kernel}:${x.line}`;

export function fromSourceLine(index, line) {
  return collect(index, {
    lines: [line],
    nodes: index.nodes.filter((n) => n.line === line).map(key),
    buffers: index.buffers.filter((b) => b.lines.includes(line)).map(key),
    kernels: index.kernels.filter((k) => k.lines.includes(line)).map(key),
    klines: index.klines.filter((e) => e.lines.includes(line)).map(klineKey),
  });
}

export function fromKernelLine(index, gid, kernel, line) {
  const e = index.klines.find((x) => x.gid === gid && x.kernel === kernel && x.line === line);
  if (!e) return collect(index, { kernels: [`${gid}:${kernel}`], klines: [`${gid}:${kernel}:${line}`] });
  return collect(index, {
    lines: e.lines,
    nodes: e.origins.map((n) => `${gid}:${n}`),
    buffers: e.buffers.map((b) => `${gid}:${b}`),
    kernels: [`${gid}:${kernel}`],
    klines: [klineKey(e)],
  });
}

// A line of a kernel's lower stage: the kernel lines it was made from, and everything
// those reach (the user's lines, nodes, buffers, the other stages' lines).
export function fromStageLine(index, gid, kernel, stage, line) {
  const klines = index.stageLines.get(`${gid}:${kernel}:${stage}:${line}`) ?? [];
  return klines.reduce((sel, kl) => union(sel, fromKernelLine(index, gid, kernel, kl)),
    collect(index, { kernels: [`${gid}:${kernel}`] }));
}

export function fromWrapperLine(index, gid, line) {
  const w = index.wlines.find((x) => x.gid === gid && x.line === line);
  return w ? fromKernel(index, gid, w.kernel) : emptySelection();
}

export function fromNode(index, gid, name) {
  const node = index.nodes.find((n) => n.gid === gid && n.name === name);
  const mine = (x) => x.gid === gid && x.origins.includes(name);
  return collect(index, {
    lines: node?.line ? [node.line] : [],
    nodes: [`${gid}:${name}`],
    buffers: index.buffers.filter(mine).map(key),
    kernels: index.kernels.filter(mine).map(key),
    klines: index.klines.filter(mine).map(klineKey),
    modules: node?.module ? [node.module] : [],
  });
}

export function fromBuffer(index, gid, name) {
  const b = index.buffers.find((x) => x.gid === gid && x.name === name);
  const mine = (x) => x.gid === gid && x.buffers.includes(name);
  return collect(index, {
    lines: b?.lines ?? [],
    nodes: (b?.origins ?? []).map((n) => `${gid}:${n}`),
    buffers: [`${gid}:${name}`],
    kernels: index.kernels.filter(mine).map(key),
    klines: index.klines.filter(mine).map(klineKey),
    modules: b?.modules ?? [],
  });
}

export function fromKernel(index, gid, name) {
  const k = index.kernels.find((x) => x.gid === gid && x.name === name);
  return collect(index, {
    lines: k?.lines ?? [],
    nodes: (k?.origins ?? []).map((n) => `${gid}:${n}`),
    buffers: (k?.buffers ?? []).map((b) => `${gid}:${b}`),
    kernels: [`${gid}:${name}`],
    modules: k?.modules ?? [],
  });
}

// `path` lies in module `root` ("" is the compiled module: everything lies in it).
export const inModule = (path, root) => path !== null && path !== undefined &&
  (root === "" || path === root || path.startsWith(`${root}.`));

// A module (and everything inside it): its nodes, the buffers and kernels made from them
// (a kernel fusing nodes of two blocks belongs to both), and their lines.
export function fromModule(index, path) {
  const nodes = index.nodes.filter((n) => inModule(n.module, path));
  const touches = (x) => x.modules.some((m) => inModule(m, path));
  const buffers = index.buffers.filter(touches);
  const kernels = index.kernels.filter(touches);
  return collect(index, {
    lines: [...new Set(nodes.map((n) => n.line).filter((l) => l))],
    nodes: nodes.map(key), buffers: buffers.map(key), kernels: kernels.map(key),
    modules: [path],
  });
}

export function union(a, b) {
  const sel = emptySelection();
  for (const kind of Object.keys(sel)) {
    a[kind].forEach((x) => sel[kind].add(x));
    b[kind].forEach((x) => sel[kind].add(x));
  }
  return sel;
}

// The hover/pin state every pane listens to. Hover wins while it lasts; a click pins.
export class SelectionBus {
  constructor() {
    this.hovered = null;
    this.pinned = null;
    this.listeners = [];
  }

  subscribe(fn) {
    this.listeners.push(fn);
  }

  get current() {
    return this.hovered ?? this.pinned ?? emptySelection();
  }

  hover(sel) {
    this.hovered = sel;
    this.emit();
  }

  unhover() {
    if (this.hovered === null) return;
    this.hovered = null;
    this.emit();
  }

  pin(sel) {
    this.pinned = sel;
    this.hovered = null;
    this.emit();
  }

  clear() {
    this.hovered = null;
    this.pinned = null;
    this.emit();
  }

  emit() {
    const sel = this.current;
    for (const fn of this.listeners) fn(sel);
  }
}
