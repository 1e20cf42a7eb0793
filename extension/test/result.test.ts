/** The stage a running compile is in, from the events so far (src/result.ts). */

import { test } from "node:test";
import assert from "node:assert/strict";
import { CompileResult } from "../src/result";
import type { StageEvent } from "../src/protocol";

function result(inductor: boolean, stages: string[]): CompileResult {
  const r = new CompileResult("r1", null, { file: "f.py", region: "function f" });
  let graphs = 0;
  const graph = () => ({ id: graphs++, name: "g", code: "", nodes: [], edges: [], kind: "inference",
    dynamo_graph: 0 });
  const data = (stage: string): unknown => stage === "source" ? { code: "", options: { inductor } }
    : stage === "capture_graph" ? graph() : {};
  stages.forEach((stage, seq) =>
    r.add({ schema: 1, seq, stage, ms: 0, data: data(stage) } as unknown as StageEvent));
  return r;
}

test("a captured graph streamed mid-capture keeps the job in capture", () => {
  assert.equal(result(false, ["source"]).stage(), "capture");
  assert.equal(result(false, ["source", "capture_graph", "capture_graph"]).stage(), "capture");
  assert.equal(result(false, ["source", "capture_graph", "capture"]).stage(), "lowering");
});

test("after profile, a compile that asked for Inductor is in the inductor stage", () => {
  const ours = ["source", "capture", "lowering", "scheduling", "memory", "codegen", "compile", "run", "profile"];
  assert.equal(result(true, ours).stage(), "inductor");
  assert.equal(result(false, ours).stage(), "done");
  assert.equal(result(true, [...ours, "inductor", "done"]).stage(), "done");
});

test("the panel is sent a captured graph once: a capture_graph event that capture repeats goes as a stub", () => {
  const r = new CompileResult("r1", null, { file: "f.py", region: "function f" });
  const graph = (id: number) => ({ id, name: `g${id}`, kind: "forward", code: "x".repeat(300), nodes: [{ name: "a" }], edges: [] });
  const events = [
    { schema: 1, seq: 0, stage: "capture_graph", ms: 0, data: graph(0) },
    { schema: 1, seq: 1, stage: "capture_graph", ms: 0, data: graph(1) },
    { schema: 1, seq: 2, stage: "capture", ms: 0, data: { graphs: [graph(0)] } },
  ] as unknown as StageEvent[];
  r.addAll(events);
  const sent = r.panelEvents();
  assert.deepEqual(sent[0].data, { id: 0, name: "g0", kind: "forward", part: "capture" }, "scalars kept, the long code and lists left to capture's copy");
  assert.deepEqual(sent[1].data, graph(1), "a graph capture does not list is sent whole");
  assert.equal(sent[2], events[2]);
  assert.deepEqual(r.events[0].data, graph(0), "the result keeps its own events whole");
});
