// Unit tests of webui/js/diff.js and the graph view of trace.js (no browser):
//   node --test tests/browser/js/
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";

import { Trace, graphView, graphLabels } from "../../../webui/js/trace.js";
import { lineDiff, sideBySide, matchKernels, opTokens, oursKernels, inductorKernels,
  optionChanges, structure, PARTIAL } from "../../../webui/js/diff.js";

const load = (name) => {
  const stored = JSON.parse(readFileSync(new URL(`../fixtures/${name}.json`, import.meta.url)));
  const trace = new Trace();
  for (const event of stored.events) trace.add(event);
  return trace;
};

test("a line diff keeps common lines and marks the rest", () => {
  const ops = lineDiff("a\nb\nc\n", "a\nx\nc\nd\n");
  assert.deepEqual(ops.map((o) => `${o.op}:${o.text}`), ["same:a", "add:x", "del:b", "same:c", "add:d"]);
  const rows = sideBySide(ops);
  assert.equal(rows.length, 4);
  assert.deepEqual([rows[1].left.text, rows[1].right.text], ["b", "x"]);
  assert.equal(rows[3].left, null);
  assert.deepEqual(lineDiff("", "a\n").map((o) => o.op), ["add"]);
  assert.deepEqual(lineDiff("same\n", "same\n").map((o) => o.op), ["same"]);
});

test("kernel names give their ops", () => {
  assert.deepEqual([...opTokens("cpp_poi_fused_add_relu_0")], ["add", "relu"]);
  assert.deepEqual([...opTokens("cpp_fused_add_relu_0")], ["add", "relu"]);
  assert.deepEqual([...opTokens("triton_per_fused__softmax_2")], ["softmax"]);
});

test("ours and Inductor's kernels are matched by their ops", () => {
  const trace = load("add_relu");
  const rows = matchKernels(oursKernels(trace), inductorKernels(trace));
  assert.equal(rows.length, 1);
  assert.equal(rows[0].how, "same ops");
  assert.equal(rows[0].a.name, "cpp_poi_fused_add_relu_0");
  assert.equal(rows[0].b.name, "cpp_fused_add_relu_0");
  assert.ok(rows[0].a.ms > 0 && rows[0].b.source.includes("#pragma omp"));
});

test("two option sets of one snippet match by name and list what changed", () => {
  const a = load("add_relu"), b = load("add_relu_nofusion");
  const rows = matchKernels(oursKernels(a), oursKernels(b));
  assert.deepEqual(rows.map((r) => r.how), ["same name"]);
  assert.deepEqual(optionChanges(a, b).map((c) => c.name), ["fusion", "inductor"]);
});

test("unmatched kernels of either side are kept", () => {
  const k = (name, gid = 0, origins = []) => ({ name, gid, kind: "pointwise", origins });
  const rows = matchKernels([k("cpp_poi_fused_sin_0", 0, ["sin"])], [k("cpp_poi_fused_cos_0", 0, ["cos"])]);
  assert.deepEqual(rows.map((r) => [r.a?.name ?? null, r.b?.name ?? null]),
    [["cpp_poi_fused_sin_0", null], [null, "cpp_poi_fused_cos_0"]]);
});

test("a graph view shows one graph of a training trace", () => {
  const trace = load("training");
  assert.deepEqual(graphLabels(trace).map((g) => g.label), ["forward 0", "backward 1"]);
  const backward = graphView(trace, [1]);
  assert.deepEqual(backward.graphs("codegen").map((g) => g.id), [1]);
  assert.equal(backward.graph("memory", 0), null);
  assert.ok(backward.kernels().every((k) => k.gid === 1));
  assert.equal(backward.data("source").entry, "step");
  assert.equal(graphView(trace, null), trace);
});

test("a graph's title names its Dynamo compile and what that compiled", () => {
  const trace = load("recompiles");
  const titles = graphLabels(trace).map((g) => g.title);
  assert.match(titles[1], /^inference graph · Dynamo compile 0\/1: f · \d+ nodes$/);
});

test("the structure compares graphs, fusion and the buffer plan", () => {
  const rows = Object.fromEntries(structure(load("add_relu"), load("modules"))
    .map((r) => [r.what, r]));
  assert.equal(rows.kernels.a, 1);
  assert.ok(rows.kernels.b > 50);
  assert.equal(rows["FX nodes"].a, 5); // two inputs, add, relu, output
  assert.ok(rows["fusions accepted"].b > rows["fusions accepted"].a);
  assert.ok(rows["ATen calls"].b > 0 && rows["ATen calls"].a === 0);
  assert.ok(rows["buffers planned"].a < rows["buffers planned"].b);
  assert.ok(rows["peak bytes"].a > 0);
});

test("a kernel matched on some of its FX nodes is a part of a group, not the same", () => {
  // Fusion on: one kernel of five nodes; off: three. The groups come from the server's
  // matcher (compiler/compare/match.py); a group of several gives a part, no delta.
  const k = (name, origins, ms) => ({ name, gid: 0, kind: "pointwise", origins, ms });
  const fused = [k("cpp_red_fused_mean_var_sub_add_sqrt_0", ["mean", "var", "sub", "add", "sqrt"], 0.026)];
  const apart = [k("cpp_red_fused_mean_0", ["mean"], 0.008), k("cpp_red_fused_var_1", ["var"], 0.007),
    k("cpp_poi_fused_sub_add_sqrt_2", ["sub", "add", "sqrt"], 0.031)];
  const groups = [{ graph: 0, nodes: ["mean", "var", "sub", "add", "sqrt"], how: "A fuses more",
    a: [fused[0].name], b: apart.map((x) => x.name) }];
  const rows = matchKernels(fused, apart, groups);
  assert.equal(rows[0].b.name, "cpp_red_fused_mean_0");
  assert.equal(rows[0].how, PARTIAL);
  assert.equal(rows.length, 3);
  const same = matchKernels([k("x_0", ["mean"], 1)], [k("y_0", ["mean"], 2)],
    [{ graph: 0, nodes: ["mean"], how: "same FX nodes", a: ["x_0"], b: ["y_0"] }]);
  assert.equal(same[0].how, "same FX nodes");
});

test("Inductor's calls pair with ours through the groups, by their call ids", () => {
  const trace = load("inductor_block");
  const ind = trace.data("inductor");
  const theirs = inductorKernels(trace);
  assert.ok(theirs.some((k) => k.kind === "extern" && k.call.startsWith("extern_kernels.addmm:")));
  const rows = matchKernels(oursKernels(trace), theirs, ind.groups);
  const same = ind.groups.filter((g) => g.how === "same FX nodes");
  assert.ok(same.length >= 1);
  for (const g of same) {
    const row = rows.find((r) => r.a?.name === g.a[0]);
    assert.equal(row.how, "same FX nodes");
    assert.equal(row.b.call, g.b[0]);
  }
});
