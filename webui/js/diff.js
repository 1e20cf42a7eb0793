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
  // A TORCH_TRACE log's trace keeps each kernel's source once, in its graph's `codegen`.
  const logged = new Map(trace.graphs("codegen").flatMap((g) =>
    g.kernels.map((k) => [`${g.id}:${k.name}`, k.source])));
  return (inductorOf(trace)?.kernels ?? []).map((k) => ({
    name: k.name, call: k.call ?? null, gid: k.graph ?? 0, kind: k.kind || kindOf(k.name),
    origins: k.nodes ?? [], lines: [],
    source: k.source || logged.get(`${k.graph ?? 0}:${k.name}`) || "", language: k.language,
    ms: k.ms ?? null, bytes: k.bytes ?? null, first_launch_ms: null }));
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

// Pairs kernels of side A with side B: the same name first, then by the groups of kernels
// that cover the same FX nodes (the server's matcher, compiler/compare/match.py: `groups`
// from GET /api/diff): a group of one kernel each is "same FX nodes", a kernel of a larger
// group pairs with one of the other side's in it, "shares FX nodes" (a part of a fused
// group whose time only the group compares); then the most ops in common by name. Returns
// rows in A's order ({a, b, how}), then B's kernels nothing matched ({a: null, b}).
export const PARTIAL = "shares FX nodes";

export function matchKernels(as, bs, groups = []) {
  const used = new Set();
  const rows = as.map((a) => ({ a, b: null, how: null }));
  const take = (row, j, how) => { row.b = bs[j]; row.how = how; used.add(j); };
  rows.forEach((row) => {
    const j = bs.findIndex((b, i) => !used.has(i) && b.name === row.a.name && b.gid === row.a.gid);
    if (j >= 0) take(row, j, "same name");
  });
  const index = new Map(bs.map((b, i) => [`${b.gid}:${b.call || b.name}`, i]));
  for (const row of rows) {
    if (row.b) continue;
    const g = groups.find((x) => x.graph === row.a.gid && x.a.includes(row.a.name));
    const j = (g?.b ?? []).map((n) => index.get(`${g.graph}:${n}`)).find((i) => i !== undefined && !used.has(i));
    if (j !== undefined) take(row, j, g.a.length === 1 && g.b.length === 1 ? "same FX nodes" : PARTIAL);
  }
  for (const row of rows) {
    if (row.b) continue;
    let best = -1, bestScore = 0;
    bs.forEach((b, i) => {
      if (used.has(i) || (row.a.kind === "extern") !== (b.kind === "extern")) return;
      const s = jaccard(opTokens(row.a.name), opTokens(b.name));
      if (s > bestScore) { best = i; bestScore = s; }
    });
    if (best >= 0) take(row, best, "same ops");
  }
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

// Each side's time of a group from the server's matcher (GET /api/diff: names only): the
// summed spread of its kernels (`ks`: that side's kernels, by graph and name or call id).
export function groupTimes(g, as, bs) {
  const pick = (ks, names) => names.map((n) => ks.find((k) => k.gid === g.graph && (k.call || k.name) === n));
  const spread = (ks) => (ks.length && ks.every(Boolean) ? sumSpread(ks.map((k) => k.time)) : null);
  return { timeA: spread(pick(as, g.a)), timeB: spread(pick(bs, g.b)) };
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
