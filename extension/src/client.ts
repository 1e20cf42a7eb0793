/**
 * The server's HTTP API as the extension host uses it (docs/server.md): health, compile,
 * the job's event stream (SSE, read with fetch and parsed here), cancel, stored traces (and
 * what their follow-ups stored after `done`) and Pygments highlighting. Comes in: a base
 * URL. Goes out: parsed JSON and StageEvents.
 */

import type { StageEvent, TracePart } from "./protocol";
import { mergePart } from "../../webui/js/trace.js";

export class ApiError extends Error {
  constructor(message: string, readonly status: number, readonly kind = "server") {
    super(message);
  }
}

export interface Health {
  ok: boolean;
  isolation?: string;
  devices?: { cuda?: boolean; gpu?: string | null };
  versions?: Record<string, string>;
}

export interface StoredTrace {
  id: string;
  created?: string;
  ok?: boolean;
  code: string;
  options?: Record<string, unknown>;
  events: StageEvent[];
  /** Each follow-up `done` lists and its state ("running", "done", "lost"). */
  follow_ups?: Record<string, string>;
  /** A big trace's parts: key -> size (its graphs' entries in `events` are stubs). */
  parts?: Record<string, number>;
}

/** `GET /api/traces/<id>/follow-ups`: the states, and every event stored after `done`. */
export interface FollowUpsAnswer {
  follow_ups?: Record<string, string>;
  events?: StageEvent[];
}

export interface CompileRequest {
  code: string;
  entry?: string;
  options: Record<string, unknown>;
}

async function request<T>(base: string, method: string, path: string, body?: unknown,
  timeoutMs = 30_000, signal?: AbortSignal): Promise<T> {
  const text = await requestText(base, method, path, body, timeoutMs, signal);
  try { return (text ? JSON.parse(text) : null) as T; } catch { return null as T; }
}

/** `request`'s answer as the text the server sent (a 2xx answer's; otherwise an ApiError). */
async function requestText(base: string, method: string, path: string, body?: unknown,
  timeoutMs = 30_000, signal?: AbortSignal): Promise<string> {
  let res: Response;
  const signals = [AbortSignal.timeout(timeoutMs), ...(signal ? [signal] : [])];
  try {
    res = await fetch(new URL(path, base), {
      method,
      headers: body === undefined ? {} : { "Content-Type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.any(signals),
    });
  } catch (err) {
    throw new ApiError(`cannot reach the Kernelscope server at ${base} (${(err as Error).message})`, 0, "network");
  }
  const text = await res.text();
  if (!res.ok) {
    let d: { error?: string } | null = null;
    try { d = text ? JSON.parse(text) : null; } catch { d = null; }
    const message = d?.error ?? (text.slice(0, 300) || res.statusText);
    throw new ApiError(`${message} (HTTP ${res.status})`, res.status,
      res.status === 503 || res.status === 429 ? "busy" : "server");
  }
  return text;
}

export class KernelscopeClient {
  constructor(readonly base: string) {}

  health(timeoutMs = 2000): Promise<Health> {
    return request<Health>(this.base, "GET", "/api/health", undefined, timeoutMs);
  }

  /**
   * The stage names, in order, of the event contract this server speaks (`GET /api/schema`),
   * or null when it does not publish one (the extension then uses the contract it was built with).
   */
  async stages(): Promise<string[] | null> {
    try {
      const answer = await request<{ stages?: unknown }>(this.base, "GET", "/api/schema");
      const stages = answer.stages;
      return Array.isArray(stages) && stages.length > 0 && stages.every((s) => typeof s === "string") ? stages : null;
    } catch {
      return null;
    }
  }

  compile(req: CompileRequest): Promise<{ job_id: string }> {
    return request(this.base, "POST", "/api/compile", req);
  }

  /**
   * Asks the server to stop a job (`POST /api/jobs/<id>/cancel`): "cancelled" (its stream then
   * ends with an `error` of kind `cancelled` and `done`), "finished" (409: too late), or
   * "unsupported" when this server has no cancel endpoint.
   */
  async cancel(jobId: string): Promise<"cancelled" | "finished" | "unsupported"> {
    try {
      await request(this.base, "POST", `/api/jobs/${encodeURIComponent(jobId)}/cancel`, {});
      return "cancelled";
    } catch (err) {
      if (err instanceof ApiError && err.status === 409) return "finished";
      if (err instanceof ApiError && (err.status === 404 || err.status === 405)) return "unsupported";
      throw err;
    }
  }

  /**
   * A stored trace as the server answers it: a big one is its head, each graph's entries a
   * stub naming its part, and `parts` (docs/server.md, "A model's trace and TRACE_LIMIT_MB").
   * `split`: a trace stored whole over 1 MiB comes in parts too (`?split=1`; a server
   * without it answers the trace whole).
   */
  head(id: string, split = false): Promise<StoredTrace> {
    return request<StoredTrace>(this.base, "GET", `/api/traces/${encodeURIComponent(id)}${split ? "?split=1" : ""}`);
  }

  /** One part of a big stored trace, stored in parts or split when read (`?split=1`). */
  async part(id: string, key: string): Promise<TracePart> {
    return JSON.parse(await this.partText(id, key)) as TracePart;
  }

  /** `part` as the JSON text the server sent (what the panel is sent, parsed there only). */
  partText(id: string, key: string): Promise<string> {
    return requestText(this.base, "GET",
      `/api/traces/${encodeURIComponent(id)}/parts/${encodeURIComponent(key)}?split=1`, undefined, 120_000);
  }

  /** A stored trace, whole: every part put back in place of its stubs (a diff reads every graph). */
  async trace(id: string): Promise<StoredTrace> {
    const stored = await this.head(id);
    const parts = await Promise.all(Object.keys(stored.parts ?? {}).map((k) => this.part(id, k)));
    for (const part of parts) mergePart(stored.events, part);
    delete stored.parts;
    return stored;
  }

  /** Two stored traces' kernels grouped by the FX nodes they cover (the server's matcher). */
  diff(a: string, b: string): Promise<{ groups: unknown[] }> {
    return request(this.base, "GET", `/api/diff/${encodeURIComponent(a)}/${encodeURIComponent(b)}`);
  }

  followUps(id: string, signal?: AbortSignal): Promise<FollowUpsAnswer> {
    return request(this.base, "GET", `/api/traces/${encodeURIComponent(id)}/follow-ups`, undefined, 10_000, signal);
  }

  async highlight(code: string, language: string): Promise<string | null> {
    const r = await request<{ html?: string }>(this.base, "POST", "/api/highlight", { code, language });
    return r?.html ?? null;
  }

  permalink(traceId: string): string {
    return new URL(`/t/${encodeURIComponent(traceId)}`, this.base).href;
  }

  diffUrl(a: string, b: string): string {
    return new URL(`/diff/${encodeURIComponent(a)}/${encodeURIComponent(b)}`, this.base).href;
  }

  /** The job's StageEvents as they arrive, through `done`; aborting `signal` ends it. */
  async *events(jobId: string, signal?: AbortSignal): AsyncGenerator<StageEvent> {
    let res: Response;
    try {
      res = await fetch(new URL(`/api/jobs/${encodeURIComponent(jobId)}/events`, this.base), {
        headers: { Accept: "text/event-stream" }, signal,
      });
    } catch (err) {
      throw new ApiError(`cannot open the event stream (${(err as Error).message})`, 0, "network");
    }
    if (!res.ok || !res.body) throw new ApiError(`event stream failed (HTTP ${res.status})`, res.status);
    const parser = new SseParser();
    const decoder = new TextDecoder();
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      for (const event of parser.push(decoder.decode(chunk, { stream: true }))) {
        yield event;
        if (event.stage === "done") return;
      }
    }
    throw new ApiError("the event stream ended before the job finished", 0, "network");
  }
}

/** Incremental `text/event-stream` parsing: `data:` lines up to a blank line make one event;
 * comments (`: heartbeat`) and `id:` lines are skipped; events are de-duplicated by `seq`. */
export class SseParser {
  private buffer = "";
  private data: string[] = [];
  private seen = new Set<number>();

  push(text: string): StageEvent[] {
    this.buffer += text;
    const out: StageEvent[] = [];
    let nl: number;
    while ((nl = this.buffer.indexOf("\n")) >= 0) {
      const line = this.buffer.slice(0, nl).replace(/\r$/, "");
      this.buffer = this.buffer.slice(nl + 1);
      if (line.startsWith("data:")) this.data.push(line.slice(5).replace(/^ /, ""));
      else if (line === "" && this.data.length) {
        const event = JSON.parse(this.data.join("\n")) as StageEvent;
        this.data = [];
        if (typeof event.seq === "number" && this.seen.has(event.seq)) continue;
        this.seen.add(event.seq);
        out.push(event);
      }
    }
    return out;
  }
}
