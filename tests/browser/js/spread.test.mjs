// Unit tests of webui/js/spread.js (no browser): how a measured time is written, when a
// change between two is coloured, the rows' sort and search, the Chrome trace export.
//   node --test tests/browser/js/
import { test } from "node:test";
import assert from "node:assert/strict";

import { fmtSpread, shortSpread, changeClass, sumSpread, sortRows, chromeTrace }
  from "../../../webui/js/spread.js";

const t = (ms, p10, p90, noisy = false) => ({ ms, p10, p90, repeats: 7, noisy });

test("a change inside either run's spread is never coloured", () => {
  // byte-identical kernels, -9%: the medians differ, the spreads overlap
  assert.equal(changeClass(t(1.0, 0.9, 1.2), t(0.91, 0.85, 1.0)), "");
  assert.equal(changeClass(t(1.0, 0.95, 1.05), t(0.9, 0.7, 1.1)), "");
});

test("a change outside both spreads is coloured by its direction", () => {
  assert.equal(changeClass(t(1.0, 0.98, 1.02), t(0.5, 0.49, 0.51)), "faster");
  assert.equal(changeClass(t(1.0, 0.98, 1.02), t(1.5, 1.45, 1.55)), "slower");
});

test("times without a spread (older traces) are not judged", () => {
  assert.equal(changeClass({ ms: 1.0 }, { ms: 0.1 }), "");
  assert.equal(changeClass(null, t(1, 1, 1)), "");
});

test("a noisy time shows its range, never one number", () => {
  assert.equal(fmtSpread(t(0.2, 0.19, 0.21)), "0.200 ms (p10–p90 0.190 ms–0.210 ms, 7 repeats)");
  assert.match(fmtSpread(t(1, 0.2, 3.1, true)), /^noisy: 0\.200 ms – 3\.1 ms \(7 repeats\)$/);
  assert.match(shortSpread(t(1, 0.2, 3.1, true)), /^noisy/);
  assert.equal(fmtSpread({ ms: 2 }), "2.0 ms");
});

test("a group's spread adds its rows'", () => {
  const s = sumSpread([t(1, 0.9, 1.1), t(2, 1.9, 2.2)]);
  assert.deepEqual([s.ms, s.p10, s.p90, s.noisy], [3, 2.8, 3.3000000000000003, false]);
  assert.equal(sumSpread([]), null);
});

test("rows sort by time and filter by name, op, module or library", () => {
  const rows = [
    { name: "k0", kind: "kernel", time: t(0.1, 0.1, 0.1), module: "blocks.0", library: "generated (C++)" },
    { name: "extern_mm_1", kind: "extern", op: "aten.mm.default", time: t(0.5, 0.5, 0.5), module: "blocks.1.attn", library: "MKL" },
    { name: "wrapper host time (graph 0)", kind: "wrapper", time: t(0.2, 0.2, 0.2), library: "Python" },
  ];
  assert.deepEqual(sortRows(rows).map((r) => r.name), ["extern_mm_1", "wrapper host time (graph 0)", "k0"]);
  assert.deepEqual(sortRows(rows, "ms", false).map((r) => r.name)[0], "k0");
  assert.deepEqual(sortRows(rows, "ms", true, "mkl").map((r) => r.name), ["extern_mm_1"]);
  assert.deepEqual(sortRows(rows, "ms", true, "blocks.").map((r) => r.name), ["extern_mm_1", "k0"]);
  assert.deepEqual(sortRows(rows, "name", false).map((r) => r.name)[0], "extern_mm_1");
});

test("the profile as a Chrome trace: one complete event per segment", () => {
  const profile = { device: "cpu",
    ours: { rows: [{ graph: 0, name: "k0", kind: "kernel", op: "", shapes: [], library: "generated (C++)" }],
      timeline: [{ graph: 0, name: "wrapper", start_us: 0, dur_us: 1 }, { graph: 0, name: "k0", start_us: 1, dur_us: 5 }] },
    eager: { rows: [], timeline: [{ graph: 0, name: "mul", start_us: 0, dur_us: 9 }] } };
  const trace = chromeTrace(profile);
  const complete = trace.traceEvents.filter((e) => e.ph === "X");
  assert.deepEqual(complete.map((e) => [e.pid, e.name, e.cat, e.ts, e.dur]),
    [[1, "wrapper", "wrapper", 0, 1], [1, "k0", "kernel", 1, 5], [2, "mul", "wrapper", 0, 9]]);
  assert.equal(trace.traceEvents.filter((e) => e.ph === "M").length, 2);
});
