/** Shared by the unit tests: a fake Kernelscope server on loopback, and paths. */

import { createServer, IncomingMessage, Server, ServerResponse } from "node:http";
import { chmodSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

export const EXT = path.resolve(__dirname, "..", "..");
export const REPO = path.resolve(EXT, "..");
export const FIXTURE = path.join(REPO, "tests", "browser", "fixtures", "softmax_block.json");

export interface RecordedTrace {
  code: string;
  options: Record<string, unknown>;
  events: { seq: number; stage: string; ms?: number; data: Record<string, unknown> }[];
}
export const recorded = (): RecordedTrace => JSON.parse(readFileSync(FIXTURE, "utf8"));

export interface FakeServer {
  url: string;
  requests: { method: string; url: string; body: unknown }[];
  /** With `followUp`: the follow-up's event is stored from now on (it "finishes"). */
  finishFollowUp(): void;
  close(): Promise<void>;
}

/** An Inductor follow-up as the server stores it after `done` (the next seq). */
export const inductorEvent = (seq: number) => ({ schema: 1, seq, stage: "inductor", ms: 1234, data: {
  measured: true, device: "cpu", inductor_ms: 0.0456, reason: null, code: ["# inductor"],
  kernels: [{ name: "cpp_fused__softmax_0", language: "cpp", source: "// inductor", ms: 0.0123 }],
} });

/** How a fake server treats Inductor: as the real one, a follow-up after `done`, stored when
 * the test says (`finishFollowUp`); `until` is `done.follow_ups_until` (Unix seconds);
 * `answers: false` is a server that no longer answers about it (stopped mid-way: HTTP 503). */
export interface FollowUpOptions {
  until: number;
  answers?: boolean;
}

/**
 * A fake server: /api/health, /api/compile (answers job "j1"), the job's SSE stream (the
 * recorded trace, or a stream that never ends with `hang`), /api/jobs/j1/cancel,
 * /api/traces/<id>, /api/diff/<a>/<b> (no groups), /api/highlight and /api/schema (its
 * stage names: `stages`, else none).
 */
export function fakeServer(opts: { hang?: boolean; cuda?: boolean; cancel?: boolean; events?: RecordedTrace["events"]; stages?: string[]; followUp?: FollowUpOptions } = {}): Promise<FakeServer> {
  const trace = recorded();
  if (opts.events) trace.events = opts.events;
  const followUp = opts.followUp;
  let finished = false;
  if (followUp) {
    trace.events[0] = { ...trace.events[0], data: { ...trace.events[0].data, options: { ...(trace.events[0].data.options as object), inductor: true } } };
    const done = trace.events.at(-1)!;
    trace.events[trace.events.length - 1] = { ...done, data: { ...done.data, trace_id: "TRACE1", follow_ups: ["inductor"], follow_ups_until: followUp.until } };
  }
  const after = () => (finished ? [inductorEvent(trace.events.length)] : []);
  const states = () => ({ inductor: finished ? "done" : "running" });
  const requests: FakeServer["requests"] = [];
  const open: ServerResponse[] = [];
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let body = "";
    req.on("data", (d) => (body += d));
    req.on("end", () => {
      requests.push({ method: req.method ?? "", url: req.url ?? "", body: body ? JSON.parse(body) : null });
      const json = (status: number, data: unknown) => {
        res.writeHead(status, { "Content-Type": "application/json" });
        res.end(JSON.stringify(data));
      };
      if (req.url === "/api/health") return json(200, { ok: true, devices: { cuda: !!opts.cuda, gpu: opts.cuda ? "NVIDIA H200" : null } });
      if (req.url === "/api/compile") return json(202, { job_id: "j1", events: "/api/jobs/j1/events" });
      if (req.url === "/api/jobs/j1/events") {
        res.writeHead(200, { "Content-Type": "text/event-stream" });
        const events = opts.hang ? trace.events.slice(0, 3) : trace.events.map((e) =>
          e.stage === "done" ? { ...e, data: { ...e.data, trace_id: "TRACE1" } } : e);
        for (const e of events) res.write(`id: ${e.seq}\ndata: ${JSON.stringify(e)}\n\n: heartbeat\n\n`);
        if (opts.hang) { open.push(res); return; }
        return res.end();
      }
      if (req.url === "/api/jobs/j1/cancel" && opts.cancel !== false) {
        // As the server does: the stream ends with an error of kind "cancelled", then done.
        for (const res of open.splice(0)) {
          res.write(`data: ${JSON.stringify({ seq: 3, stage: "error", ms: 0, data: { stage: "scheduling", kind: "cancelled", message: "cancelled by the client" } })}\n\n`);
          res.end(`data: ${JSON.stringify({ seq: 4, stage: "done", ms: 0, data: { ok: false, trace_id: "PARTIAL1" } })}\n\n`);
        }
        return json(202, { cancelled: true });
      }
      if (followUp && req.url?.endsWith("/follow-ups")) {
        if (followUp.answers === false) return json(503, { error: "the server is stopping" });
        return json(200, { follow_ups: states(), events: after() });
      }
      if (req.url?.startsWith("/api/traces/")) {
        const stored = followUp ? { follow_ups: states(), events: [...trace.events, ...after()] } : {};
        return json(200, { id: req.url.split("?")[0].split("/").pop(), ok: true, ...trace, ...stored });
      }
      if (req.url?.startsWith("/api/diff/")) return json(200, { groups: [] });
      if (req.url === "/api/schema" && opts.stages) return json(200, { version: 1, stages: opts.stages });
      if (req.url === "/api/highlight") return json(200, { html: "<div class=\"highlight\"><pre></pre></div>" });
      return json(404, { error: "not found", status: 404 });
    });
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => {
    const address = server.address();
    const port = typeof address === "object" && address ? address.port : 0;
    resolve({ url: `http://127.0.0.1:${port}`, requests, finishFollowUp: () => { finished = true; }, close: () => new Promise<void>((r) => {
      for (const res of open) res.destroy();
      server.closeAllConnections();
      server.close(() => r());
    }) });
  }));
}

/** A shell script that runs test/fixtures/fake-python.cjs with node: a fake interpreter. */
export function fakePython(): string {
  const dir = mkdtempSync(path.join(tmpdir(), "ks-fake-python-"));
  const file = path.join(dir, "python");
  writeFileSync(file, `#!/bin/sh\nexec "${process.execPath}" "${path.join(EXT, "test", "fixtures", "fake-python.cjs")}" "$@"\n`);
  chmodSync(file, 0o755);
  return file;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Waits until `fn` is true (polling), or fails after `ms`. */
export async function until(fn: () => boolean, ms = 5000, what = "condition"): Promise<void> {
  const end = Date.now() + ms;
  while (!fn()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}
