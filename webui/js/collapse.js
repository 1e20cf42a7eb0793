// A graph folded by module path, for the graph pane: a model's FX graph (or its kernel
// graph) is hundreds or thousands of nodes, so by default each block of a repeated stack
// (the modules of a ModuleList or Sequential: `h.3` of `h.3.attn.c_proj`) is one unit, the
// modules beside the stack (`wte`, `ln_f`, `lm_head`) one unit each, and the blocks of one
// stack that hold the same ops are one unit that says so: "h.0-11 ×12". Opening a unit
// shows what it holds (a stack's blocks, a block's nodes). Nodes in no module stay nodes,
// unless there are more than LOOSE_LIMIT of them (an optimizer step's thousands): those are
// grouped by the kernel that computes them. Graph inputs and outputs join the unit of their
// neighbours when all of them lie in one unit that is folded (any unit, once anything in
// the graph is folded).
//
// In: items `{ id, module, io, op }` (module: a path, "" for the root, null for none; io:
// an input or output node) and edges `[from, to]`. Out: the visible units and the edges
// between them; pure data, no DOM (tests/browser/js/collapse.test.mjs).

const LOOSE_LIMIT = 120;

// A graph of at most this many nodes opens whole: folding is for a model's graph, and a
// snippet's few dozen nodes read better as themselves ("fold" still folds them).
export const WHOLE_UP_TO = 100;
// In `open`: every unit opened, the graph shown node by node.
export const ALL = "*";

// The units opened when a graph is first shown: all of a small graph, none of a large one.
export function firstOpen(count) {
  return new Set(count <= WHOLE_UP_TO ? [ALL] : []);
}

const isIndex = (part) => /^\d+$/.test(part);

// "h.3" of "model.h.3.attn": the shortest prefix that ends in a numeric part, or null.
export function blockOf(path) {
  if (!path) return null;
  const parts = path.split(".");
  const at = parts.findIndex(isIndex);
  return at < 0 ? null : parts.slice(0, at + 1).join(".");
}

// The unit a module path folds into when nothing is opened: its block, else its prefix at
// the depth of the stack's parent's siblings (`model.ln_f` beside `model.h`), else null.
function homeOf(path, depth) {
  if (!path) return null;
  const block = blockOf(path);
  if (block) return block;
  const parts = path.split(".");
  return parts.length >= depth ? parts.slice(0, depth).join(".") : null;
}

// Blocks of one stack (same parent) with the same ops: the runs worth folding into one.
function runsOf(blocks, signature) {
  const buckets = new Map();
  for (const block of blocks) {
    const parent = block.slice(0, block.lastIndexOf("."));
    const key = `${parent}|${signature.get(block)}`;
    if (!buckets.has(key)) buckets.set(key, { parent, blocks: [] });
    buckets.get(key).blocks.push(block);
  }
  const runs = new Map(); // block -> run
  for (const { parent, blocks: members } of buckets.values()) {
    if (members.length < 2) continue;
    const indices = members.map((b) => Number(b.slice(b.lastIndexOf(".") + 1)))
      .sort((a, b) => a - b);
    const id = `run:${parent}:${indices[0]}`;
    const run = { id, parent, indices, blocks: members, label: `${parent}.${ranges(indices)} ×${members.length}` };
    for (const b of members) runs.set(b, run);
  }
  return runs;
}

// [0,1,2,3,5] -> "0-3,5"
export function ranges(indices) {
  const out = [];
  let start = indices[0], prev = indices[0];
  for (const i of [...indices.slice(1), null]) {
    if (i !== null && i === prev + 1) { prev = i; continue; }
    out.push(start === prev ? `${start}` : `${start}-${prev}`);
    start = prev = i;
  }
  return out.join(",");
}

/**
 * @param {{id: string, module?: string|null, io?: boolean, op?: string, kernel?: string|null}[]} items
 * @param {[string, string][]} edges
 * @param {Set<string>} open units the user opened
 */
export function collapse(items, edges, open = new Set()) {
  if (open.has(ALL)) return whole(items, edges);
  const blocks = [...new Set(items.map((n) => blockOf(n.module)).filter(Boolean))];
  const depth = blocks.length ? Math.max(1, blocks[0].split(".").length - 1) : 1;
  const signature = new Map();
  for (const n of items) {
    const b = blockOf(n.module);
    if (b) signature.set(b, `${signature.get(b) ?? ""}${n.op ?? ""};`);
  }
  for (const [b, ops] of signature) signature.set(b, ops.split(";").sort().join(";"));
  const runs = runsOf(blocks, signature);
  const loose = items.filter((n) => !n.io && homeOf(n.module, depth) === null).length;
  const units = new Map();
  const unitOf = new Map();
  const add = (id, make) => {
    if (!units.has(id)) units.set(id, { id, members: [], ...make() });
    return units.get(id);
  };
  for (const n of items) {
    if (n.io) continue;
    const home = homeOf(n.module, depth);
    const run = home ? runs.get(home) : undefined;
    let unit;
    if (run && !open.has(run.id)) {
      unit = add(run.id, () => ({ kind: "run", label: run.label, paths: run.blocks.map((b) => b) }));
    } else if (home && !open.has(home)) {
      unit = add(home, () => ({ kind: "block", label: home, paths: [home] }));
    } else if (!home && loose > LOOSE_LIMIT && n.kernel && !open.has(`kernel:${n.kernel}`)) {
      unit = add(`kernel:${n.kernel}`, () => ({ kind: "kernel", label: n.kernel, paths: [] }));
    } else {
      unit = add(n.id, () => ({ kind: "node", item: n }));
    }
    unit.members.push(n.id);
    unitOf.set(n.id, unit.id);
  }
  placeInputs(items, edges, unitOf, units, open);
  return { units: [...units.values()], edges: between(edges, unitOf), unitOf };
}

// The edges between units, once each.
function between(edges, unitOf) {
  const seen = new Set();
  const out = [];
  for (const [a, b] of edges) {
    const ua = unitOf.get(a), ub = unitOf.get(b);
    if (ua === undefined || ub === undefined || ua === ub) continue;
    const key = `${ua}\u0000${ub}`;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push([ua, ub]);
  }
  return out;
}

// Every item its own unit.
function whole(items, edges) {
  const units = items.map((n) => ({ id: n.id, members: [n.id], kind: "node", item: n }));
  const unitOf = new Map(items.map((n) => [n.id, n.id]));
  return { units, edges: between(edges, unitOf), unitOf };
}

// Inputs and outputs join the one unit every neighbour of theirs lies in; those joined only
// to other inputs and outputs (a parameter the forward graph returns for backward) are one
// unit; the rest stand alone.
function placeInputs(items, edges, unitOf, units, open) {
  const neighbours = new Map();
  const io = new Map(items.filter((n) => n.io).map((n) => [n.id, n]));
  for (const [a, b] of edges) {
    if (io.has(a)) (neighbours.get(a) ?? neighbours.set(a, new Set()).get(a)).add(b);
    if (io.has(b)) (neighbours.get(b) ?? neighbours.set(b, new Set()).get(b)).add(a);
  }
  const homesOf = (id) => new Set([...(neighbours.get(id) ?? [])].map((m) => unitOf.get(m))
    .filter((u) => u !== undefined));
  const alone = [...io.keys()].filter((id) => {
    const homes = homesOf(id);
    return homes.size !== 1 || units.get([...homes][0])?.kind === "node";
  });
  // Hundreds of inputs (an optimizer's parameters and states): the ones with no one
  // neighbour are one unit.
  const folded = !open.has("io:rest");
  const many = folded && alone.length > LOOSE_LIMIT;
  // In a folded graph an input or output joins its one neighbour, whatever it is.
  const join = many || [...units.values()].some((u) => u.kind !== "node");
  for (const [id, n] of io) {
    const homes = homesOf(id);
    const [only] = homes;
    const unit = homes.size === 1 && only !== undefined ? units.get(only) : null;
    if (unit && (unit.kind !== "node" || join)) {
      unit.members.push(id);
      unitOf.set(id, unit.id);
    } else if (many || (folded && homes.size === 0)) { // many, or only joined to other inputs/outputs
      const rest = units.get("io:rest") ?? { id: "io:rest", members: [], kind: "inputs",
        label: "graph inputs and outputs", paths: [] };
      units.set(rest.id, rest);
      rest.members.push(id);
      unitOf.set(id, rest.id);
    } else {
      units.set(id, { id, members: [id], kind: "node", item: n });
      unitOf.set(id, id);
    }
  }
}
