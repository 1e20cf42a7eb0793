// Comparing two traces: the kernels of each side (ours from codegen/scheduling/profile,
// or Inductor's own from the `inductor` event), a kernel-level match-up, and a line diff.
// Pure functions over event data; panes/diff.js draws them.

import { inductorOf } from "./trace.js";
import { sumSpread } from "./spread.js";
/** @typedef {import("./trace.js").Trace} Trace */

// Our kernels in execution order, with what the diff shows about each.
/** @param {Trace} trace */
export function oursKernels(trace) {
  const sources = new Map(trace.graphs("codegen").flatMap((g) =>
    g.kernels.map((k) => [`${g.id}:${k.name}`, k])));
  const timed = new Map((trace.data("profile")?.kernels ?? []).map((k) => [k.name, k]));
  const launched = new Map(trace.graphs("compile").flatMap((g) =>
    (g.kernels ?? []).map((k) => [`${g.id}:${k.name}`, k])));
  return trace.kernels().map((k) => {
    const src = sources.get(`${k.gid}:${k.name}`);
    return { name: k.name, gid: k.gid, kind: k.kind, origins: k.origins ?? [],
      lines: k.lines ?? [], source: src?.source ?? null, language: src?.language ?? null,
      ms: timed.get(k.name)?.ms ?? null, time: timed.get(k.name)?.time ?? null,
      first_launch_ms: launched.get(`${k.gid}:${k.name}`)?.ms ?? null };
  });
}

// Inductor's kernels, cut out of its output code, each with its median time per launch
// where the `inductor` event timed it (older traces: none).
/** @param {Trace} trace */
export function inductorKernels(trace) {
  return (inductorOf(trace)?.kernels ?? []).map((k) => ({
    name: k.name, gid: 0, kind: kindOf(k.name), origins: [], lines: [], source: k.source,
    language: k.language, ms: k.ms ?? null, first_launch_ms: null }));
}

const kindOf = (name) => (/_(red|per)_/.test(name) ? "reduction" : "pointwise");

// "cpp_poi_fused_add_relu_0" / "triton_per_fused__softmax_2" -> {add, relu} / {softmax}
export function opTokens(name) {
  // The backend's prefix is whatever stands before "fused_" (or the first word).
  const core = (name.includes("fused_") ? name.replace(/^.*?fused_/, "")
    : name.replace(/^[a-z0-9]+_/, "").replace(/^(poi|red|per)_/, "")).replace(/_\d+$/, "");
  return new Set(core.split("_").filter((t) => t && !/^\d+$/.test(t)));
}

function jaccard(a, b) {
  if (!a.size && !b.size) return 0;
  let both = 0;
  for (const x of a) if (b.has(x)) both++;
  return both / (a.size + b.size - both);
}

// Pairs kernels of side A with side B: the same name first, then the most FX nodes in
// common (same graph: "same FX nodes" when both fuse exactly the same, else "shares FX
// nodes", a part of a fused group whose time only the group compares), then the most ops
// in common by name. Returns rows in A's order ({a, b, how}), then B's kernels nothing
// matched ({a: null, b}).
export const PARTIAL = "shares FX nodes";

export function matchKernels(as, bs) {
  const used = new Set();
  const rows = as.map((a) => ({ a, b: null, how: null }));
  const take = (row, j, how) => { row.b = bs[j]; row.how = how; used.add(j); };
  rows.forEach((row) => {
    const j = bs.findIndex((b, i) => !used.has(i) && b.name === row.a.name && b.gid === row.a.gid);
    if (j >= 0) take(row, j, "same name");
  });
  const scored = (score, how) => {
    for (const row of rows) {
      if (row.b) continue;
      let best = -1, bestScore = 0;
      bs.forEach((b, i) => {
        if (used.has(i)) return;
        const s = score(row.a, b);
        if (s > bestScore) { best = i; bestScore = s; }
      });
      if (best >= 0) take(row, best, typeof how === "function" ? how(bestScore) : how);
    }
  };
  scored((a, b) => (a.gid === b.gid ? jaccard(new Set(a.origins), new Set(b.origins)) : 0),
    (score) => (score === 1 ? "same FX nodes" : PARTIAL));
  scored((a, b) => (a.kind === "extern") === (b.kind === "extern")
    ? jaccard(opTokens(a.name), opTokens(b.name)) : 0, "same ops");
  bs.forEach((b, i) => { if (!used.has(i)) rows.push({ a: null, b, how: null }); });
  return rows;
}

// Line diff by longest common subsequence: [{op: "same"|"del"|"add", a, b, text}] with
// 1-based line numbers on the side(s) the line is on.
export function lineDiff(left, right) {
  const a = (left ?? "").replace(/\n$/, "").split("\n");
  const b = (right ?? "").replace(/\n$/, "").split("\n");
  if (!left) a.length = 0;
  if (!right) b.length = 0;
  const n = a.length, m = b.length;
  const lcs = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      lcs[i][j] = a[i] === b[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
    }
  }
  const out = [];
  let i = 0, j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[i] === b[j]) { out.push({ op: "same", a: i + 1, b: j + 1, text: a[i] }); i++; j++; }
    else if (j < m && (i === n || lcs[i][j + 1] >= lcs[i + 1][j])) { out.push({ op: "add", b: j + 1, text: b[j] }); j++; }
    else { out.push({ op: "del", a: i + 1, text: a[i] }); i++; }
  }
  return out;
}

// Side-by-side rows from a line diff: the deletions of a changed run face its additions.
export function sideBySide(ops) {
  const rows = [];
  for (let k = 0; k < ops.length;) {
    if (ops[k].op === "same") { rows.push({ left: ops[k], right: ops[k] }); k++; continue; }
    const dels = [], adds = [];
    while (k < ops.length && ops[k].op !== "same") (ops[k].op === "del" ? dels : adds).push(ops[k++]);
    for (let r = 0; r < Math.max(dels.length, adds.length); r++) {
      rows.push({ left: dels[r] ?? null, right: adds[r] ?? null });
    }
  }
  return rows;
}

// Options that differ between two traces' source events.
export function optionChanges(a, b) {
  const oa = a.data("source")?.options ?? {}, ob = b.data("source")?.options ?? {};
  return [...new Set([...Object.keys(oa), ...Object.keys(ob)])]
    .filter((k) => JSON.stringify(oa[k]) !== JSON.stringify(ob[k]) && k !== "cache_dir")
    .map((k) => ({ name: k, a: oa[k], b: ob[k] }));
}

// Kernels grouped by the FX nodes they fuse: a group joins every kernel of A and of B
// (same graph) that shares an FX node with another of the group, so a fused kernel of A
// faces the set of B's kernels it replaced. Each group's time is the sum of its kernels'.
// Kernels without FX nodes (Inductor's) stand alone. Returns [{nodes, a, b, msA, msB}].
export function fusedGroups(as, bs) {
  const items = [...as.map((k) => ({ k, side: "a" })), ...bs.map((k) => ({ k, side: "b" }))];
  const parent = items.map((_, i) => i);
  const find = (i) => (parent[i] === i ? i : (parent[i] = find(parent[i])));
  const owner = new Map(); // "gid:node" -> the first item holding it
  items.forEach(({ k }, i) => {
    for (const node of k.origins ?? []) {
      const key = `${k.gid}:${node}`;
      if (owner.has(key)) parent[find(i)] = find(owner.get(key));
      else owner.set(key, i);
    }
  });
  const groups = new Map();
  items.forEach((item, i) => {
    const root = find(i);
    if (!groups.has(root)) groups.set(root, { nodes: new Set(), a: [], b: [] });
    const g = groups.get(root);
    g[item.side].push(item.k);
    for (const node of item.k.origins ?? []) g.nodes.add(node);
  });
  const total = (ks) => (ks.length && ks.every((k) => k.ms != null)
    ? ks.reduce((s, k) => s + k.ms, 0) : null);
  const spread = (ks) => (ks.length ? sumSpread(ks.map((k) => k.time)) : null);
  return [...groups.values()].map((g) => ({ nodes: [...g.nodes], a: g.a, b: g.b,
    msA: total(g.a), msB: total(g.b), timeA: spread(g.a), timeB: spread(g.b) }));
}

// The two compiles' structure side by side: graph nodes, kernels, fusions, the buffer
// plan. Rows [{what, a, b}] where a value is a number (or null: not in the trace).
export function structure(ta, tb) {
  const facts = (t) => {
    const sum = (xs) => (xs.length ? xs.reduce((s, x) => s + x, 0) : null);
    const sched = t.graphs("scheduling");
    const mem = t.graphs("memory");
    const kernels = t.kernels();
    return {
      "FX nodes": sum(t.graphs("capture").map((g) => (g.nodes ?? []).length)),
      kernels: kernels.length || null,
      "ATen calls": kernels.length ? kernels.filter((k) => k.kind === "extern").length : null,
      "fusions accepted": sum(sched.map((g) => (g.decisions ?? []).filter((d) => d.fused).length)),
      "fusions refused": sum(sched.map((g) => (g.decisions ?? []).filter((d) => !d.fused).length)),
      "buffers planned": sum(mem.map((g) => (g.buffers ?? []).length)),
      "peak bytes": sum(mem.map((g) => g.peak_bytes ?? 0)),
      "peak bytes without reuse": sum(mem.map((g) => g.peak_bytes_no_reuse ?? 0)),
    };
  };
  const fa = facts(ta), fb = facts(tb);
  return Object.keys(fa).map((what) => ({ what, a: fa[what], b: fb[what] }));
}
