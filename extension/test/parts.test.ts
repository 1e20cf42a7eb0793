/** A big stored trace is served as its head and one part per graph (docs/server.md, "A
 * model's trace and TRACE_LIMIT_MB"): Open Permalink posts the head to the panel and reads
 * each part when the panel asks for it; `KernelscopeClient.trace` (a diff's) asks for every
 * part and hands back the trace whole. */

import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import * as vscode from "vscode";
import { KernelscopeClient } from "../src/client";
import { harness } from "./harness";
import { until } from "./helpers";

const h = harness();

const graph = (id: number) => ({ id, name: `graph${id}`, kind: "forward", nodes: [{ name: "x" }], edges: [] });
const lowered = (id: number) => ({ id, buffers: [{ name: `buf${id}` }] });
const stubOf = (id: number) => ({ id, part: `g${id}`, lengths: { nodes: 1 } });
const generated = (id: number) => ({ id, kernels: [{ name: `k${id}`, source: `// kernel ${id}`, language: "cpp" }] });

/** A fake server holding one trace in parts; `asked` lists each URL it was asked. */
async function partedServer(head: object, part: (id: number) => object): Promise<{ url: string; asked: string[]; close(): void }> {
  const asked: string[] = [];
  const server = createServer((req, res) => {
    asked.push(req.url ?? "");
    const key = /\/parts\/g(\d)\?split=1$/.exec(req.url ?? "");
    res.writeHead(200, { "Content-Type": "application/json" });
    res.end(JSON.stringify(key ? part(Number(key[1])) : head));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, asked, close: () => server.close() };
}

test("a big trace goes to the panel as its head; each part when the panel asks, and into the result", async () => {
  const head = {
    id: "abcdefabcdef", code: "x = 1\n", parts: { g0: 10, g1: 10 },
    events: [
      { schema: 1, seq: 0, stage: "capture", ms: 0, data: { graphs: [stubOf(0), stubOf(1)] } },
      { schema: 1, seq: 1, stage: "codegen", ms: 0, data: { graphs: [stubOf(0), stubOf(1)] } },
      { schema: 1, seq: 2, stage: "done", ms: 0, data: { ok: true } },
    ],
  };
  const srv = await partedServer(head, (id) => ({ graphs: { capture: [graph(id)], codegen: [generated(id)] } }));
  try {
    await vscode.commands.executeCommand("kernelscope.openPermalink", `${srv.url}/t/abcdefabcdef`);
    const webview = h.panel().webview;
    webview.send({ type: "ready", restored: false });
    const [trace] = h.posted("trace") as unknown as Array<{ events: string; stored?: string; parts?: Record<string, string> }>;
    assert.equal(trace.stored, "abcdefabcdef");
    assert.deepEqual(JSON.parse(trace.events), head.events, "the head, as the server sent it, as JSON text");
    // The first graph's part comes with it (the panel draws nothing before it), as JSON text.
    assert.deepEqual(Object.keys(trace.parts ?? {}), ["g0"]);
    assert.deepEqual(JSON.parse(trace.parts!.g0).graphs.codegen, [generated(0)]);
    // The first graph's part is read ahead, beside the head; no other. Both ask for a trace
    // stored whole in parts too.
    assert.deepEqual(srv.asked.sort(), ["/api/traces/abcdefabcdef/parts/g0?split=1", "/api/traces/abcdefabcdef?split=1"]);
    const result = h.session.result!;
    await until(() => result.code(0, "k0") !== null, 5000, "the part sent is the result's");
    assert.equal(result.code(0, "k0")?.source, "// kernel 0");
    assert.equal(result.code(1, "k1"), null, "a part is the result's once the panel has asked for it");

    for (const key of ["g0", "g1", "g1"]) webview.send({ type: "part", trace: "abcdefabcdef", key });
    await until(() => h.posted("part").length === 3, 5000, "the parts answered");
    const answers = h.posted("part") as unknown as Array<{ key: string; part: string }>;
    assert.deepEqual(answers.map((a) => [a.key, JSON.parse(a.part).graphs.codegen]), [["g0", [generated(0)]], ["g1", [generated(1)]], ["g1", [generated(1)]]]);
    assert.equal(srv.asked.filter((u) => u.endsWith("/parts/g1?split=1")).length, 1, "each part is read once");
    assert.equal(result.code(1, "k1")?.source, "// kernel 1", "the editor opens a shown graph's kernels");

    // A part of a trace the panel no longer shows is refused, not read.
    webview.send({ type: "part", trace: "otherotherot", key: "g0" });
    await until(() => h.posted("part").length === 4);
    assert.match((h.posted("part").at(-1) as unknown as { error: string }).error, /no longer/);
    assert.equal(srv.asked.length, 3);
  } finally {
    srv.close();
  }
});

test("a trace stored in parts comes back whole", async () => {
  const head = {
    id: "abcdefabcdef", code: "x", parts: { g0: 10, g1: 10 },
    events: [
      { schema: 1, seq: 0, stage: "capture_graph", ms: 0, data: stubOf(0) },
      { schema: 1, seq: 1, stage: "capture", ms: 0, data: { graphs: [stubOf(0), stubOf(1)] } },
      { schema: 1, seq: 2, stage: "lowering", ms: 0, data: { graphs: [stubOf(0), stubOf(1)] } },
      { schema: 1, seq: 3, stage: "done", ms: 0, data: { ok: true } },
    ],
  };
  const asked: string[] = [];
  const server = createServer((req, res) => {
    asked.push(req.url ?? "");
    const part = /\/parts\/g(\d)\?split=1$/.exec(req.url ?? "");
    const body = part
      ? { graphs: { capture: [graph(Number(part[1]))], lowering: [lowered(Number(part[1]))] } }
      : head;
    res.writeHead(200, { "Content-Type": "application/json" });
    res.end(JSON.stringify(body));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  try {
    const port = (server.address() as AddressInfo).port;
    const trace = await new KernelscopeClient(`http://127.0.0.1:${port}`).trace("abcdefabcdef");
    assert.deepEqual(asked.sort(), ["/api/traces/abcdefabcdef", "/api/traces/abcdefabcdef/parts/g0?split=1",
      "/api/traces/abcdefabcdef/parts/g1?split=1"]);
    assert.deepEqual(trace.events[0].data, graph(0));
    assert.deepEqual((trace.events[1].data as { graphs: unknown[] }).graphs, [graph(0), graph(1)]);
    assert.deepEqual((trace.events[2].data as { graphs: unknown[] }).graphs, [lowered(0), lowered(1)]);
    assert.equal(trace.parts, undefined);
  } finally {
    server.close();
  }
});
