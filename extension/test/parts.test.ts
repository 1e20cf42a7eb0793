/** A big stored trace is served as its head and one part per graph (docs/server.md, "A
 * model's trace and TRACE_LIMIT_MB"): `KernelscopeClient.trace` asks for every part and
 * hands back the trace whole, as a job streamed it, for the webview. */

import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { KernelscopeClient } from "../src/client";

const graph = (id: number) => ({ id, name: `graph${id}`, kind: "forward", nodes: [{ name: "x" }], edges: [] });
const lowered = (id: number) => ({ id, buffers: [{ name: `buf${id}` }] });
const stub = (id: number) => ({ id, part: `g${id}`, lengths: { nodes: 1 } });

test("a trace stored in parts comes back whole", async () => {
  const head = {
    id: "abcdefabcdef", code: "x", parts: { g0: 10, g1: 10 },
    events: [
      { schema: 1, seq: 0, stage: "capture_graph", ms: 0, data: stub(0) },
      { schema: 1, seq: 1, stage: "capture", ms: 0, data: { graphs: [stub(0), stub(1)] } },
      { schema: 1, seq: 2, stage: "lowering", ms: 0, data: { graphs: [stub(0), stub(1)] } },
      { schema: 1, seq: 3, stage: "done", ms: 0, data: { ok: true } },
    ],
  };
  const asked: string[] = [];
  const server = createServer((req, res) => {
    asked.push(req.url ?? "");
    const part = /\/parts\/g(\d)$/.exec(req.url ?? "");
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
    assert.deepEqual(asked.sort(), ["/api/traces/abcdefabcdef", "/api/traces/abcdefabcdef/parts/g0",
      "/api/traces/abcdefabcdef/parts/g1"]);
    assert.deepEqual(trace.events[0].data, graph(0));
    assert.deepEqual((trace.events[1].data as { graphs: unknown[] }).graphs, [graph(0), graph(1)]);
    assert.deepEqual((trace.events[2].data as { graphs: unknown[] }).graphs, [lowered(0), lowered(1)]);
    assert.equal(trace.parts, undefined);
  } finally {
    server.close();
  }
});
