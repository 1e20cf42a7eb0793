// The `gpu_stages` follow-up (Triton's stages compiled offline, after the result) fills
// the kernels' entries of `compile`, where the code pane reads a build's lower stages:
//   node --test tests/browser/js/
import { test } from "node:test";
import assert from "node:assert/strict";

import { Trace } from "../../../webui/js/trace.js";

const note = "Triton's stages compiled for sm_90 come after the result (the gpu_stages follow-up)";

test("a gpu_stages event merges each kernel's report into compile", () => {
  const trace = new Trace();
  trace.add({ schema: 1, seq: 0, stage: "compile", ms: 5, data: { graphs: [{ id: 0, ms: 5,
    cache_hit: false, kernels: [{ name: "triton_poi_fused_add_0", ms: 1.5, stages_note: note },
      { name: "triton_red_fused_sum_1", ms: 2.5, stages_note: note }] }] } });
  trace.add({ schema: 1, seq: 1, stage: "gpu_stages", ms: 900, data: { graphs: [{ id: 0,
    ms: 900, cache_hit: false, kernels: [{ name: "triton_poi_fused_add_0", ms: null,
      cache_hit: false, ir: { ptx: ".target sm_90a" }, line_maps: { ptx: [] },
      gpu_target: "sm_90", stages_note: null, registers: 16 }] }] } });
  const [add, sum] = trace.graphs("compile")[0].kernels;
  assert.equal(add.ir.ptx, ".target sm_90a");
  assert.equal(add.gpu_target, "sm_90");
  assert.equal(add.stages_note, null);
  assert.equal(add.registers, 16);
  assert.equal(add.ms, 1.5);  // the first launch's time stays the compile stage's
  assert.equal(sum.stages_note, note);  // a kernel the follow-up did not name is unchanged
});
