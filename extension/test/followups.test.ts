/** Follow-ups after `done` (docs/server.md, "Follow-ups"): the job's stream ends with `done`
 * listing `inductor`, and the extension asks `GET /api/traces/<id>/follow-ups` until the
 * server has stored Inductor's event (or its deadline passes), into the panel and the status
 * bar. The fake server stores the event when the test says so (order, not timing). */

import { test } from "node:test";
import assert from "node:assert/strict";
import * as vscode from "vscode";
import { stub, Position, Selection, WebviewPanel } from "./vscode-stub";
import { KernelscopeClient } from "../src/client";
import { watchFollowUps, FOLLOW_UP_SLACK_MS } from "../src/followups";
import { isHostToWebview, isWebviewToHost } from "../src/protocol";
import type { StageEvent } from "../src/protocol";
import { CompileResult } from "../src/result";
import { FakeServer, FollowUpOptions, inductorEvent, recorded, until } from "./helpers";
import { harness } from "./harness";

const h = harness();
const { panel, statusText } = h;

const later = () => Date.now() / 1000 + 600;

async function start(followUp: FollowUpOptions): Promise<FakeServer> {
  const srv = await h.start({ followUp });
  h.session.followUpPollMs = 1;
  return srv;
}

type FollowUpsMessage = { type: "followUps"; states: Record<string, string>; events: StageEvent[] };
const followUps = (p = panel()) => h.posted("followUps", p) as FollowUpsMessage[];
const polls = (s: FakeServer) => s.requests.filter((r) => r.url === "/api/traces/TRACE1/follow-ups").length;

async function compileBlock(): Promise<void> {
  const editor = stub.openEditor("/work/block.py", recorded().code);
  editor.selection = new Selection(new Position(4, 0), new Position(8, 4));
  const running = vscode.commands.executeCommand("kernelscope.compileSelection");
  await until(() => stub.panels.length > 0, 5000, "the panel");
  panel().webview.send({ type: "ready", restored: false });
  await running;
}

test("after done the panel and status bar say Inductor runs; its stored event fills both, then polling stops", async () => {
  const s = await start({ until: later() });
  await compileBlock();
  // The stream ended at `done`, which lists the follow-up; the compile command has returned.
  const done = h.session.result!.trace.done!;
  assert.deepEqual(done.follow_ups, ["inductor"]);
  assert.equal(h.session.isRunning, false);
  assert.deepEqual(followUps()[0], { type: "followUps", states: { inductor: "running" }, events: [] });
  assert.match(statusText(), /\$\(check\) Kernelscope: 4 kernels · 0\.187 ms \(eager [\d.]+ ms\) · Inductor running/);
  await until(() => polls(s) >= 2, 5000, "the extension to ask about the follow-up");
  assert.equal(h.session.result!.trace.has("inductor"), false);

  s.finishFollowUp();
  await h.session.followUps;
  const last = followUps().at(-1)!;
  assert.deepEqual(last.states, { inductor: "done" });
  // The stored event reaches the panel once, however often it was asked for.
  const posted = followUps().flatMap((m) => m.events);
  assert.deepEqual(posted.map((e) => [e.stage, e.seq]), [["inductor", recorded().events.length]]);
  assert.equal(h.session.result!.trace.data("inductor")?.inductor_ms, 0.0456);
  assert.match(statusText(), /\$\(check\) Kernelscope: 4 kernels · 0\.187 ms .* · Inductor 0\.046 ms$/);
  // The watch has ended: nothing more is asked.
  const asked = polls(s);
  await new Promise((r) => setImmediate(r));
  assert.equal(polls(s), asked);
});

test("past follow_ups_until a follow-up that was never stored is lost: the panel and status bar say so", async () => {
  // A server that still says "running" (its clock behind ours), past the deadline.
  await start({ until: 1000 });
  await compileBlock();
  await h.session.followUps;
  assert.deepEqual(followUps().at(-1), { type: "followUps", states: { inductor: "lost" }, events: [] });
  assert.equal(h.session.result!.trace.followUps.inductor, "lost");
  assert.match(statusText(), /· Inductor did not finish$/);
});

test("a server that stops answering: asked again until the deadline, then lost", async () => {
  await start({ until: later(), answers: false });
  const client = new KernelscopeClient(h.srv.url);
  const result = new CompileResult("r", null, { file: "block.py", region: "function block" });
  const events = recorded().events;
  for (const e of events.slice(0, -1)) result.add(e as never);
  const until = 2000;
  result.add({ ...events.at(-1)!, data: { ok: true, trace_id: "TRACE1", follow_ups: ["inductor"], follow_ups_until: until } } as never);
  // The clock: three answers before the deadline (each fails), then one past it.
  const clock = [1000, 1500, until * 1000 + FOLLOW_UP_SLACK_MS - 1, until * 1000 + FOLLOW_UP_SLACK_MS + 1];
  const updates: Record<string, string>[] = [];
  await watchFollowUps(client, result, { pollMs: 0, now: () => clock.shift() ?? Infinity, onUpdate: (states) => updates.push(states) });
  assert.equal(h.srv.requests.filter((r) => r.url.endsWith("/follow-ups")).length, 4);
  assert.deepEqual(updates, [{ inductor: "lost" }]);
  assert.equal(result.followUpsPending(), false);
});

test("the stored follow-up is mapped to the file's lines like the stream, and a watch stops when it is aborted", async () => {
  await start({ until: later() });
  const client = new KernelscopeClient(h.srv.url);
  const result = new CompileResult("r", null, { file: "block.py", region: "function block" });
  for (const e of recorded().events) result.add((e.stage === "done" ? { ...e, data: { ok: true, trace_id: "TRACE1", follow_ups: ["inductor"], follow_ups_until: later() } } : e) as never);
  const abort = new AbortController();
  let answers = 0;
  const watching = watchFollowUps(client, result, { pollMs: 0, signal: abort.signal, onUpdate: () => { if (++answers === 3) abort.abort(); } });
  await watching;
  assert.equal(answers, 3, "aborted after the third answer, nothing after");
  h.srv.finishFollowUp();
  const mapped: StageEvent[] = [];
  await watchFollowUps(client, result, { pollMs: 0, map: (e) => ({ ...e, ms: 1 }), onUpdate: (_, events) => mapped.push(...events) });
  assert.deepEqual(mapped.map((e) => [e.stage, e.ms]), [["inductor", 1]]);
  assert.equal(result.trace.ms("inductor"), 1);
});

test("a permalink opened while Inductor runs fills in when it is stored", async () => {
  const s = await start({ until: later() });
  await vscode.commands.executeCommand("kernelscope.openPermalink", `${s.url}/t/TRACE1`);
  panel().webview.send({ type: "ready", restored: false });
  await until(() => followUps().length > 0, 5000, "the follow-ups message");
  assert.deepEqual(followUps()[0].states, { inductor: "running" });
  assert.match(statusText(), /Inductor running/);
  s.finishFollowUp();
  await h.session.followUps;
  const last = followUps().at(-1)!;
  assert.deepEqual([last.states, last.events.map((e) => e.stage)], [{ inductor: "done" }, ["inductor"]]);
  // A new panel is sent the trace with Inductor in it, and the states.
  assert.equal(h.session.result!.events.at(-1)!.stage, "inductor");
});

test("a new compile stops watching the previous trace's follow-ups", { timeout: 20_000 }, async () => {
  await start({ until: later() });
  await compileBlock();
  const first = h.session.followUps;
  const firstResult = h.session.result!;
  await compileBlock();
  await first; // settles only because the new result stopped it
  assert.notEqual(h.session.result, firstResult);
  assert.equal(firstResult.trace.has("inductor"), false);
  h.srv.finishFollowUp();
  await h.session.followUps;
  assert.equal(h.session.result!.trace.has("inductor"), true);
});

test("a panel restored while Inductor ran asks the configured server again", async () => {
  const s = await start({ until: later() });
  const events = (await (await fetch(`${s.url}/api/traces/TRACE1`)).json()).events as StageEvent[];
  const editor = stub.openEditor("/work/block.py", recorded().code);
  const title = { file: "block.py", region: "function block", document: editor.document.uri.toString() };
  const restored = new WebviewPanel("kernelscope.panel", "Kernelscope", {});
  await stub.serializers.get("kernelscope.panel")!.deserializeWebviewPanel(restored as never, {});
  restored.webview.send({ type: "ready", restored: true });
  restored.webview.send({ type: "restore", title, events, followUps: { inductor: "running" } });
  await until(() => polls(s) > 0, 5000, "a question about the follow-up");
  s.finishFollowUp();
  await until(() => followUps(restored).some((m) => m.states.inductor === "done"), 5000, "the stored event");
  assert.equal(h.session.result!.trace.has("inductor"), true);

  assert.equal(isWebviewToHost({ type: "restore", title, events: [], followUps: { inductor: 3 } }), false);
  assert.equal(isHostToWebview({ type: "followUps", states: { inductor: "done" }, events: [inductorEvent(10)] }), true);
  assert.equal(isHostToWebview({ type: "followUps", states: { inductor: null }, events: [] }), false);
  assert.equal(isHostToWebview({ type: "followUps", states: {}, events: [{ seq: 1 }] }), false);
});
