// Unit tests of webui/js/collapse.js, the graph pane's folding by module (no browser):
//   node --test tests/browser/js/
import { test } from "node:test";
import assert from "node:assert/strict";

import { collapse, blockOf, ranges, firstOpen, ALL, WHOLE_UP_TO } from "../../../webui/js/collapse.js";

// A stack of `n` like blocks under `model.h`, each two ops, then a head; one input per block.
function stack(n) {
  const items = [{ id: "x", io: true, module: null }];
  const edges = [];
  let prev = "x";
  for (let i = 0; i < n; i++) {
    for (const op of ["mm", "gelu"]) {
      const id = `${op}_${i}`;
      items.push({ id, module: `model.h.${i}.mlp`, op });
      edges.push([prev, id]);
      prev = id;
    }
    items.push({ id: `w${i}`, io: true, module: null });
    edges.push([`w${i}`, `mm_${i}`]);
  }
  items.push({ id: "head", module: "model.lm_head", op: "mm" }, { id: "out", io: true, module: null });
  edges.push([prev, "head"], ["head", "out"]);
  return { items, edges };
}

test("a block is the shortest path that ends in an index", () => {
  assert.equal(blockOf("model.h.3.attn.c_proj"), "model.h.3");
  assert.equal(blockOf("model.ln_f"), null);
  assert.equal(blockOf(null), null);
  assert.equal(ranges([0, 1, 2, 3, 5, 7, 8]), "0-3,5,7-8");
});

test("like blocks fold into one unit that says how many", () => {
  const { items, edges } = stack(12);
  const { units, edges: between } = collapse(items, edges);
  const labels = units.map((u) => u.label ?? u.id);
  assert.ok(labels.includes("model.h.0-11 ×12"), labels.join(" | "));
  assert.ok(labels.includes("model.lm_head"));
  const run = units.find((u) => u.kind === "run");
  // every block's ops and weights are in the stack's unit, and so is x (its one user is
  // there); out joins the head
  assert.equal(run.members.length, 12 * 3 + 1);
  assert.deepEqual(units.filter((u) => u.kind === "node").map((u) => u.id), []);
  assert.ok(units.find((u) => u.id === "model.lm_head").members.includes("out"));
  assert.deepEqual(between, [[run.id, "model.lm_head"]]);
});

test("opening the stack shows its blocks, opening a block its nodes", () => {
  const { items, edges } = stack(3);
  const first = collapse(items, edges);
  const run = first.units.find((u) => u.kind === "run");
  const opened = collapse(items, edges, new Set([run.id]));
  assert.deepEqual(opened.units.filter((u) => u.kind === "block").map((u) => u.id),
    ["model.h.0", "model.h.1", "model.h.2", "model.lm_head"]);
  const deeper = collapse(items, edges, new Set([run.id, "model.h.1"]));
  assert.ok(deeper.units.some((u) => u.id === "mm_1" && u.kind === "node"));
  // in a folded graph an input joins its one user, an opened node too
  assert.equal(deeper.unitOf.get("w1"), "mm_1");
  assert.equal(deeper.unitOf.get("mm_2"), "model.h.2");
});

test("blocks with different ops are not folded together", () => {
  const { items, edges } = stack(3);
  items.push({ id: "extra", module: "model.h.2.mlp", op: "relu" });
  edges.push(["gelu_2", "extra"]);
  const { units } = collapse(items, edges);
  const runs = units.filter((u) => u.kind === "run");
  assert.deepEqual(runs.map((u) => u.label), ["model.h.0-1 ×2"]);
  assert.ok(units.some((u) => u.id === "model.h.2" && u.kind === "block"));
});

test("a small graph opens whole, a model's folded; ALL opens every unit", () => {
  const small = stack(2);
  const large = stack(60);
  assert.ok(small.items.length <= WHOLE_UP_TO && large.items.length > WHOLE_UP_TO);
  assert.deepEqual([...firstOpen(small.items.length)], [ALL]);
  assert.deepEqual([...firstOpen(large.items.length)], []);
  const { units, edges } = collapse(small.items, small.edges, new Set([ALL]));
  assert.deepEqual(units.map((u) => u.id), small.items.map((n) => n.id));
  assert.ok(units.every((u) => u.kind === "node" && u.members.length === 1));
  assert.deepEqual(edges, small.edges);
  const folded = collapse(small.items, small.edges, new Set());
  assert.ok(folded.units.some((u) => u.kind !== "node"));
});
