// Unit tests of webui/js/provenance.js and trace.js on the fixture trace (no browser):
//   node --test tests/browser/js/
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";

import { Trace } from "../../../webui/js/trace.js";
import {
  buildIndex, fromSourceLine, fromKernelLine, fromNode, fromBuffer, fromKernel,
  fromWrapperLine, fromStageLine, isEmpty, SelectionBus, emptySelection,
} from "../../../webui/js/provenance.js";

const fixture = JSON.parse(readFileSync(new URL("../fixtures/softmax_block.json", import.meta.url)));

function loaded() {
  const trace = new Trace();
  for (const event of fixture.events) trace.add(event);
  return { trace, index: buildIndex(trace) };
}

const sorted = (set) => [...set].sort();

test("a duplicate event (same seq) is ignored", () => {
  const trace = new Trace();
  assert.equal(trace.add(fixture.events[0]), true);
  assert.equal(trace.add(fixture.events[0]), false);
  assert.equal(trace.events.length, 1);
});

test("source lines that produced something", () => {
  const { index } = loaded();
  assert.deepEqual(sorted(index.sourceLines), [6, 7, 8, 9]);
});

test("a source line reaches its nodes, buffers, kernels and kernel lines", () => {
  const { index } = loaded();
  const sel = fromSourceLine(index, 9);
  assert.deepEqual(sorted(sel.nodes), ["0:add_2", "0:mul_4"]);
  assert.deepEqual(sorted(sel.buffers), ["0:buf4"]);
  assert.deepEqual(sorted(sel.kernels), ["0:cpp_poi_fused__softmax_add_mul_3"]);
  const lines = [...sel.klines].filter((k) => !k.includes(":wrapper:"));
  assert.ok(lines.length > 0);
  assert.ok(lines.every((k) => k.startsWith("0:cpp_poi_fused__softmax_add_mul_3:")));
  assert.ok(sel.klines.has("0:wrapper:19"), "the kernel's call in the wrapper");
});

test("a kernel line leads back to its source line, buffer and FX node", () => {
  const { index } = loaded();
  const sel = fromKernelLine(index, 0, "cpp_red_fused__softmax_2", 22);
  assert.deepEqual(sorted(sel.lines), [8]);
  assert.deepEqual(sorted(sel.nodes), ["0:sub"]);
  assert.deepEqual(sorted(sel.buffers), ["0:buf3"]);
  assert.deepEqual(sorted(sel.klines), ["0:cpp_red_fused__softmax_2:22", "0:wrapper:17"]);
});

test("an FX node used by two kernels selects both", () => {
  const { index } = loaded();
  const sel = fromNode(index, 0, "exp");
  assert.deepEqual(sorted(sel.kernels),
    ["0:cpp_poi_fused__softmax_add_mul_3", "0:cpp_red_fused__softmax_2"]);
  assert.deepEqual(sorted(sel.lines), [8]);
});

test("buffers, kernels and wrapper lines", () => {
  const { index } = loaded();
  assert.deepEqual(sorted(fromBuffer(index, 0, "buf1").kernels), ["0:cpp_poi_fused_gelu_1"]);
  assert.deepEqual(sorted(fromKernel(index, 0, "extern_mm_0").lines), [6]);
  assert.ok(fromKernel(index, 0, "extern_mm_0").klines.has("0:wrapper:12"));
  assert.deepEqual(sorted(fromWrapperLine(index, 0, 17).kernels), ["0:cpp_red_fused__softmax_2"]);
  assert.ok(isEmpty(fromWrapperLine(index, 0, 1)));
});

test("the bus: hover wins over a pin until it ends", () => {
  const { index } = loaded();
  const bus = new SelectionBus();
  const seen = [];
  bus.subscribe((sel) => seen.push(sorted(sel.lines)));
  bus.pin(fromSourceLine(index, 6));
  bus.hover(fromSourceLine(index, 8));
  bus.unhover();
  bus.clear();
  assert.deepEqual(seen, [[6], [8], [6], []]);
  assert.ok(isEmpty(emptySelection()));
});

// The H200 trace: the compile event's line_maps tie PTX/SASS/... lines to kernel lines.
const h200 = JSON.parse(readFileSync(new URL("../fixtures/h200_softmax.json", import.meta.url)));

function h200Loaded() {
  const trace = new Trace();
  for (const event of h200.events) trace.add(event);
  return { trace, index: buildIndex(trace) };
}

test("a kernel line reaches the lines of its lower stages, and a stage line comes back", () => {
  const { trace, index } = h200Loaded();
  const kernel = trace.graphs("codegen")[0].kernels[0];
  const source = kernel.source.split("\n");
  const load = source.findIndex((l) => l.includes("tl.load(")) + 1;
  const ptx = trace.graphs("compile")[0].kernels[0].ir.ptx.split("\n");
  const sel = fromKernelLine(index, 0, kernel.name, load);
  const ptxLines = [...sel.slines].filter((k) => k.includes(":ptx:"))
    .map((k) => Number(k.split(":").pop()));
  assert.ok(ptxLines.length > 0);
  assert.ok(ptxLines.some((n) => ptx[n - 1].includes("ld.global")), "the load's PTX");
  assert.ok(ptxLines.every((n) => !ptx[n - 1].includes("st.global")), "not the store's");
  assert.ok([...sel.slines].some((k) => k.includes(":sass:")), "and its SASS");
  // Back: a line of the load's PTX selects the load's kernel line and the user's line.
  const back = fromStageLine(index, 0, kernel.name, "ptx", ptxLines[0]);
  assert.ok(back.klines.has(`0:${kernel.name}:${load}`));
  assert.ok(back.slines.has(`0:${kernel.name}:ptx:${ptxLines[0]}`));
  assert.deepEqual(sorted(back.lines), [11]);
});

test("the user's line reaches the stage lines through its kernel lines", () => {
  const { trace, index } = h200Loaded();
  const sel = fromSourceLine(index, 11);
  const stages = new Set([...sel.slines].map((k) => k.split(":")[2]));
  assert.deepEqual([...stages].sort(), ["llir", "ptx", "sass", "ttgir", "ttir"]);
  const unmapped = fromSourceLine(index, 3);
  assert.equal(unmapped.slines.size, 0);
  assert.ok(trace.graphs("compile")[0].kernels[0].line_maps.sass.length > 0);
});
