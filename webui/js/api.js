// The server's HTTP API as the UI uses it. The event stream is read with fetch (not
// EventSource) so a dropped connection ends the stream instead of silently replaying it.

import { mergePart } from "./trace.js";

export class ApiError extends Error {
  constructor(message, status, kind = "server") {
    super(message);
    this.status = status;
    this.kind = kind;
  }
}

async function request(method, url, body) {
  let res;
  try {
    res = await fetch(url, {
      method,
      headers: body ? { "Content-Type": "application/json" } : {},
      body: body ? JSON.stringify(body) : undefined,
    });
  } catch (err) {
    throw new ApiError(`cannot reach the server (${err.message})`, 0, "network");
  }
  const text = await res.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (!res.ok) {
    const message = data?.error || data?.message || text.slice(0, 300) || res.statusText;
    const kind = res.status === 429 || res.status === 503 ? "busy" : "server";
    throw new ApiError(`${message} (HTTP ${res.status})`, res.status, data?.kind || kind);
  }
  return data;
}

export const getSamples = () => request("GET", "/api/samples");
export const getHealth = () => request("GET", "/api/health");
export const getOptions = () => request("GET", "/api/options");
export const getSchema = () => request("GET", "/api/schema");
export const cancelJob = (id) => request("POST", `/api/jobs/${encodeURIComponent(id)}/cancel`);
// A stored trace as its row holds it: whole, or a big trace's head, whose `parts` names
// the parts getPart fetches (docs/server.md, "A model's trace and TRACE_LIMIT_MB"). With
// `split`, a big trace stored whole answers in parts too (server/store/readsplit.py): the
// page opens it one graph at a time. A part is asked for with `split=1` always: a stored
// part is answered as before, a split one only so.
export const getTrace = (id, { split = false } = {}) =>
  request("GET", `/api/traces/${encodeURIComponent(id)}${split ? "?split=1" : ""}`);
export const getPart = (id, key) => request("GET",
  `/api/traces/${encodeURIComponent(id)}/parts/${encodeURIComponent(key)}?split=1`);
// The whole trace: its head with every part put back (the diff page reads every graph).
export async function getWholeTrace(id) {
  const stored = await getTrace(id);
  const parts = await Promise.all(Object.keys(stored?.parts ?? {}).map((k) => getPart(id, k)));
  for (const part of parts) mergePart(stored.events ?? [], part);
  return stored;
}
// After `done`: each follow-up's state ("running", "done", "lost") and the events stored
// after `done` (docs/server.md, "Follow-ups").
export const getFollowUps = (id) =>
  request("GET", `/api/traces/${encodeURIComponent(id)}/follow-ups`);
// Two stored traces' kernels grouped by the FX nodes they cover (b "inductor": trace a's
// own Inductor follow-up): {groups: [{graph, nodes, a, b, how, a_ms, b_ms, a_bytes, b_bytes}]}.
export const getDiff = (a, b) =>
  request("GET", `/api/diff/${encodeURIComponent(a)}/${encodeURIComponent(b)}`);
export const getRebuild = (id, graph) =>
  request("GET", `/api/traces/${encodeURIComponent(id)}/graphs/${graph}/rebuild`);
export const startCompile = (code, options) => request("POST", "/api/compile", { code, options });
export const uploadTrace = (files) => request("POST", "/api/traces", { files });

const highlightCache = new Map();

// Pygments HTML for `code`, or null when the server cannot highlight it.
export function highlight(code, language) {
  const key = `${language}\u0000${code}`;
  if (!highlightCache.has(key)) {
    highlightCache.set(key, request("POST", "/api/highlight", { code, language })
      .then((r) => r?.html ?? null)
      .catch(() => null));
  }
  return highlightCache.get(key);
}

// Yields the StageEvents of a job as they arrive, through its final `done`.
/** @returns {AsyncGenerator<import("../types/events").StageEvent>} */
export async function* jobEvents(jobId, signal) {
  let res;
  try {
    res = await fetch(`/api/jobs/${encodeURIComponent(jobId)}/events`, {
      headers: { Accept: "text/event-stream" }, signal,
    });
  } catch (err) {
    throw new ApiError(`cannot open the event stream (${err.message})`, 0, "network");
  }
  if (!res.ok) throw new ApiError(`event stream failed (HTTP ${res.status})`, res.status);
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let data = [];
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value;
    let nl;
    while ((nl = buffer.indexOf("\n")) >= 0) {
      const line = buffer.slice(0, nl).replace(/\r$/, "");
      buffer = buffer.slice(nl + 1);
      if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      else if (line === "" && data.length) {
        const event = JSON.parse(data.join("\n"));
        data = [];
        yield event;
        if (event.stage === "done") { reader.cancel().catch(() => {}); return; }
      }
    }
  }
  throw new ApiError("the event stream ended before the job finished", 0, "network");
}
