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
