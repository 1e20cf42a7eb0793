/**
 * The messages between the extension host and the Kernelscope webview, in one place.
 *
 * The host does all HTTP and SSE; it posts StageEvents (docs/events.md) and selections into
 * the webview, and the webview answers with what the user pointed at. Both sides import this
 * module, and both check what they receive with the guards below (a webview message is
 * untrusted input to the host).
 */

/** One StageEvent of docs/events.md, typed from its schema (webui/types/events.d.ts). */
import type { StageEvent } from "../../webui/types/events";
export type { StageEvent };

/** One part of a big stored trace: each stage's entries of its graphs, in place of their
 * stubs (server/store/parts.py). */
export interface TracePart {
  graphs?: Record<string, Array<{ id: number }>>;
}

/**
 * A payload as its JSON text. A model's trace is hundreds of thousands of small objects,
 * which every hop between the extension host and the webview's frame copies one by one (and
 * VS Code in a browser makes several); one string crosses them as one copy, and the webview
 * parses it once (docs/perf.md, "The VS Code panel").
 */
export type Json = string;

/** The value of `x`, parsed when it is JSON text (a `Json` payload). */
export function fromJson<T>(x: T | Json): T {
  return typeof x === "string" ? JSON.parse(x) as T : x;
}

/** A `trace` message's events, parsed and checked (null: not a list of events). */
export function traceEvents(events: StageEvent[] | Json): StageEvent[] | null {
  let list: unknown;
  try {
    list = fromJson<unknown>(events);
  } catch {
    return null;
  }
  return Array.isArray(list) && list.every((e) => isObject(e) && typeof e.stage === "string")
    ? list as StageEvent[] : null;
}

/** What the panel shows above the panes: which file and region a trace came from. */
export interface TraceTitle {
  file: string;
  region: string;
  traceId?: string | null;
  server?: string;
  /** The URI of the document the trace's source lines belong to. */
  document?: string | null;
}

/** One side of a diff: a stored trace, and the page that shows it alone. */
export interface DiffSide {
  id: string;
  href: string;
  events: StageEvent[];
}

export type HostToWebview =
  /** A new compile starts: clear every pane. */
  | { type: "reset"; title: TraceTitle }
  /** One StageEvent of the running job, as the server streamed it. */
  | { type: "event"; event: StageEvent }
  /** A stored trace (a permalink, or a panel restored after a reload). A big one comes as
   * its head (docs/server.md, "A model's trace"): `stored` names it, and the webview asks
   * for each graph's part (`part`) when that graph is shown; `parts` are those the host
   * read ahead (the first graph's), by key, which it need not ask for. The host sends the
   * events and parts as their JSON text (`Json`). */
  | { type: "trace"; title: TraceTitle; events: StageEvent[] | Json; stored?: string; parts?: Record<string, Json> }
  /** The answer to a `part` request: the part (as JSON text from the host), or why it could
   * not be read. */
  | { type: "part"; trace: string; key: string; part: TracePart | Json | null; error?: string }
  /** After `done`: each follow-up's state (running, done, lost) and the events the server
   * stored after `done` since the last such message (docs/server.md, "Follow-ups"). */
  | { type: "followUps"; states: Record<string, string>; events: StageEvent[] }
  /** The editor's cursor or selection is on these source lines: show their provenance. */
  | { type: "selectLines"; lines: number[]; pin: boolean }
  /** The answer to a `highlight` request: Pygments HTML, or null to stay plain. */
  | { type: "highlighted"; id: number; html: string | null }
  /** Compare two stored traces in the web UI's Diff pane (Compare With Previous). */
  | { type: "diff"; a: DiffSide; b: DiffSide; groups: unknown[] }
  /** A failure outside the event stream (server unreachable, HTTP error, cancelled). */
  | { type: "failure"; kind: string; message: string };

export type WebviewToHost =
  /** The script has loaded and listens; the host may (re)send the current trace. */
  | { type: "ready"; restored: boolean }
  /** A click pinned a selection: reveal these source lines in the editor. */
  | { type: "reveal"; lines: number[] }
  /** A hover (or its end) in a pane: mark these source lines in the editor. */
  | { type: "hover"; lines: number[] }
  /** Open a generated kernel (or a graph's wrapper, kernel "wrapper") as a document. */
  | { type: "openKernel"; gid: number; kernel: string }
  /** Highlight code with the server's Pygments (`POST /api/highlight`). */
  | { type: "highlight"; id: number; code: string; language: string }
  /** The status strip's Cancel button: stop the running job. */
  | { type: "cancel" }
  /** One part of the big stored trace `trace` (`GET /api/traces/<trace>/parts/<key>`). */
  | { type: "part"; trace: string; key: string }
  /** A panel restored after a reload hands its trace back, so the editor is decorated again. */
  | { type: "restore"; title: TraceTitle; events: StageEvent[] | Json; followUps?: Record<string, string>;
      stored?: string };

const isObject = (x: unknown): x is Record<string, unknown> =>
  typeof x === "object" && x !== null && !Array.isArray(x);
const isStates = (x: unknown): x is Record<string, string> =>
  isObject(x) && Object.values(x).every((v) => typeof v === "string");
/** A trace id or a part key: short, and safe in a URL path segment once encoded. */
const isName = (x: unknown): x is string => typeof x === "string" && /^[\w.-]{1,128}$/.test(x);
const isLines = (x: unknown): x is number[] =>
  Array.isArray(x) && x.length <= 100_000 && x.every((n) => Number.isInteger(n) && n > 0);

/** True when `m` is a well-formed message from the webview. */
export function isWebviewToHost(m: unknown): m is WebviewToHost {
  if (!isObject(m)) return false;
  switch (m.type) {
    case "ready":
      return typeof m.restored === "boolean";
    case "cancel":
      return true;
    case "part":
      return isName(m.trace) && isName(m.key);
    case "reveal":
    case "hover":
      return isLines(m.lines);
    case "openKernel":
      return Number.isInteger(m.gid) && typeof m.kernel === "string" && m.kernel.length < 500;
    case "highlight":
      return Number.isInteger(m.id) && typeof m.code === "string" && typeof m.language === "string";
    case "restore":
      return isObject(m.title) && (typeof m.events === "string" || (Array.isArray(m.events) && m.events.length < 10_000 &&
        m.events.every((e) => isObject(e) && typeof e.stage === "string" && typeof e.seq === "number"))) &&
        (m.followUps === undefined || isStates(m.followUps)) && (m.stored === undefined || isName(m.stored));
    default:
      return false;
  }
}

/** True when `m` is a well-formed message from the host. */
export function isHostToWebview(m: unknown): m is HostToWebview {
  if (!isObject(m)) return false;
  switch (m.type) {
    case "reset":
      return isObject(m.title);
    case "event":
      return isObject(m.event) && typeof m.event.stage === "string";
    case "trace":
      return isObject(m.title) && (Array.isArray(m.events) || typeof m.events === "string") &&
        (m.stored === undefined || typeof m.stored === "string") &&
        (m.parts === undefined || (isObject(m.parts) && Object.values(m.parts).every((p) => typeof p === "string")));
    case "part":
      return typeof m.trace === "string" && typeof m.key === "string" &&
        (m.part === null || isObject(m.part) || typeof m.part === "string");
    case "followUps":
      return isStates(m.states) && Array.isArray(m.events) && m.events.every((e) => isObject(e) && typeof e.stage === "string");
    case "selectLines":
      return isLines(m.lines) && typeof m.pin === "boolean";
    case "highlighted":
      return Number.isInteger(m.id) && (m.html === null || typeof m.html === "string");
    case "failure":
      return typeof m.kind === "string" && typeof m.message === "string";
    case "diff":
      return [m.a, m.b].every((x) => isObject(x) && typeof x.id === "string" && Array.isArray(x.events))
        && Array.isArray(m.groups) && m.groups.every(isObject);
    default:
      return false;
  }
}

/** What the webview keeps with setState, so a hidden or restored panel shows the same. */
export interface WebviewState {
  title: TraceTitle | null;
  /** The trace's events, as JSON text (what VS Code's setState stores is JSON: one string is
   * one copy); a state saved by an older panel has the list. */
  events: StageEvent[] | Json;
  /** Each follow-up's state as the host last said (a lost one has no event to show it). */
  followUps?: Record<string, string>;
  tab?: string;
  /** A big stored trace's id: `events` is its head, and its graphs' parts are asked for again. */
  stored?: string;
  /** The graphs shown (null: all). */
  graphs?: number[] | null;
}
