/**
 * One finished (or running) compile as the extension host keeps it: its events, the file
 * and region it came from, and what the editor needs from them: which source lines made
 * which kernels, with times and % of peak, and each kernel's and wrapper's generated code.
 * Built on the web UI's own Trace and provenance index (webui/js), so the editor and the
 * panel agree on every line. No vscode here.
 */

import type { StageEvent, TraceTitle, TracePart } from "./protocol";
import type { Payloads, StageName } from "../../webui/types/events";
import { Trace, followUpState, followUpsPending, inductorOf } from "../../webui/js/trace.js";
import { buildIndex } from "../../webui/js/provenance.js";
import EVENT_SCHEMA from "../../docs/events.schema.json";

/** The pipeline's stages in order, from the checked-in event contract: used until the server
 * says its own (`useStages`, from `GET /api/schema`). */
const BUILT_STAGES: string[] = EVENT_SCHEMA["x-stages"];

export interface KernelInfo {
  gid: number;
  name: string;
  kind: string;
  lines: number[];
  ms: number | null;
  pctPeak: number | null;
  gbps: number | null;
}

export interface Note {
  line: number;
  severity: "error" | "warning" | "info";
  message: string;
}

export interface GeneratedCode {
  gid: number;
  /** A kernel name, or "wrapper". */
  name: string;
  /** VS Code language id: python (Triton, wrappers) or cpp. */
  language: string;
  /** What made it, as the trace labels it: the kernel's backend ("C++", "Triton"), or "Python". */
  target: string;
  source: string;
}

export class CompileResult {
  readonly trace = new Trace();
  index = buildIndex(this.trace);

  private stageOrder: string[] = BUILT_STAGES;
  /** A big stored trace's id (its events are the head; docs/server.md, "A model's trace"):
   * each graph's part is read when the panel shows that graph. Null: the trace is whole. */
  stored: string | null = null;
  /** Each part asked for (or read ahead), by key; merged into the trace when first asked for. */
  private parts = new Map<string, Promise<TracePart>>();
  private merged = new Map<string, Promise<TracePart>>();

  constructor(
    /** Identifies this result in kernelscope: URIs. */
    readonly id: string,
    /** The document the source lines belong to (a URI string), if any. */
    readonly documentUri: string | null,
    readonly title: TraceTitle,
  ) {}

  add(event: StageEvent): boolean {
    return this.addAll([event]) > 0;
  }

  /** Events in order (a stored trace): the provenance index built once; how many were new. */
  addAll(events: StageEvent[]): number {
    const added = events.filter((e) => this.trace.add(e)).length;
    if (added) this.index = buildIndex(this.trace);
    return added;
  }

  /**
   * The events as the panel is sent them: a `capture_graph` event whose graph is also in
   * `capture` goes as a stub (its scalar fields, `part: "capture"`), as a big stored trace's
   * head keeps it (docs/server.md): the panes read `capture`'s copy, and the second copy is a
   * fifth of a model's trace, which the panel's transport pays for by the byte.
   */
  panelEvents(): StageEvent[] {
    const captured = new Set((this.trace.data("capture")?.graphs ?? []).map((g) => g.id));
    return this.events.map((e) => {
      const data = e.data as { id?: number; part?: unknown };
      if (e.stage !== "capture_graph" || !captured.has(data.id as number) || typeof data.part === "string") return e;
      const small = Object.entries(data).filter(([, v]) => v === null || ["boolean", "number"].includes(typeof v) ||
        (typeof v === "string" && v.length <= 200));
      return { ...e, data: { ...Object.fromEntries(small), id: data.id, part: "capture" } } as unknown as StageEvent;
    });
  }

  /** A part on its way, so that it is read once (a failed read is read again when asked). */
  private readAhead(key: string, part: Promise<TracePart>): void {
    part.catch(() => this.parts.delete(key));
    this.parts.set(key, part);
  }

  /**
   * One part of the stored trace, read once (`read`) and merged into this result's trace when
   * first asked for (after the panel has the head: the head it was sent stays as it was).
   * A failed read is tried again on the next ask.
   */
  part(key: string, read: (key: string) => Promise<TracePart>): Promise<TracePart> {
    const done = this.merged.get(key);
    if (done) return done;
    let reading = this.parts.get(key);
    if (!reading) {
      reading = read(key);
      this.readAhead(key, reading);
    }
    const merging = reading.then((part) => {
      this.trace.addPart(part);
      this.index = buildIndex(this.trace);
      return part;
    });
    merging.catch(() => this.merged.delete(key));
    this.merged.set(key, merging);
    return merging;
  }

  /** Each follow-up's state as the server last said it (`GET /api/traces/<id>/follow-ups`). */
  setFollowUps(states: Record<string, string>): void {
    this.trace.followUps = { ...states };
  }

  /** Is a follow-up `done` listed still to come (the web UI's rule)? */
  followUpsPending(): boolean {
    return followUpsPending(this.trace);
  }

  /** Each follow-up `done` lists, and its state: "running", "done" or "lost". */
  followUpStates(): Record<string, string> {
    const stages = (this.trace.done?.follow_ups ?? []) as StageName[];
    return Object.fromEntries(stages.map((s) => [s, followUpState(this.trace, s) ?? "running"]));
  }

  /** Past its deadline: every follow-up still running will not come (the server's "lost"). */
  loseFollowUps(): void {
    for (const stage of this.trace.done?.follow_ups ?? []) {
      if (followUpState(this.trace, stage as StageName) === "running") this.trace.followUps[stage] = "lost";
    }
  }

  get events(): StageEvent[] {
    return this.trace.events;
  }

  get traceId(): string | null {
    return this.trace.traceId ?? null;
  }

  get ok(): boolean | null {
    return this.trace.done ? this.trace.done.ok !== false : null;
  }

  /** Source lines that produced something, each with the kernels it went into. */
  lineKernels(): Map<number, KernelInfo[]> {
    const kernels = this.kernels();
    const byLine = new Map<number, KernelInfo[]>();
    for (const line of this.index.sourceLines as Set<number>) byLine.set(line, []);
    for (const k of kernels) {
      for (const line of k.lines) {
        const list = byLine.get(line) ?? [];
        list.push(k);
        byLine.set(line, list);
      }
    }
    return byLine;
  }

  /** Every kernel in execution order, with its profile numbers when measured. */
  kernels(): KernelInfo[] {
    const profile: Partial<Payloads["profile"]> = this.trace.data("profile") ?? {};
    const timed = new Map((profile.kernels ?? []).map((k) => [k.name, k]));
    return this.trace.kernels().map((k) => ({
      gid: k.gid, name: k.name, kind: k.kind, lines: k.lines ?? [],
      ms: timed.get(k.name)?.ms ?? null, pctPeak: timed.get(k.name)?.pct_peak ?? null,
      gbps: timed.get(k.name)?.gbps ?? null,
    }));
  }

  /** The generated kernels and wrappers (codegen), in order. */
  generated(): GeneratedCode[] {
    const out: GeneratedCode[] = [];
    for (const g of this.trace.graphs("codegen")) {
      for (const k of g.kernels) {
        out.push({ gid: g.id, name: k.name, language: k.language === "cpp" ? "cpp" : "python",
          target: k.target || g.backend_label || g.backend || "", source: k.source });
      }
      if (g.wrapper) out.push({ gid: g.id, name: "wrapper", language: "python", target: "Python", source: g.wrapper.source });
    }
    return out;
  }

  code(gid: number, name: string): GeneratedCode | null {
    return this.generated().find((c) => c.gid === gid && c.name === name) ?? null;
  }

  /** What the editor shows as diagnostics: the error's line, graph breaks, ATen fallbacks. */
  notes(): Note[] {
    const notes: Note[] = [];
    const error = this.trace.error;
    if (error && typeof error.line === "number") {
      notes.push({ line: error.line, severity: "error",
        message: `${error.kind ?? "error"}${error.stage ? ` in ${error.stage}` : ""}: ${error.message ?? ""}` });
    }
    const capture: Partial<Payloads["capture"]> = this.trace.data("capture") ?? {};
    for (const b of capture.graph_breaks ?? []) {
      if (typeof b.line === "number") notes.push({ line: b.line, severity: "warning", message: `graph break: ${b.reason ?? ""}` });
    }
    for (const g of this.trace.graphs("lowering")) {
      for (const f of g.fallbacks ?? []) {
        if (typeof f.line === "number") {
          notes.push({ line: f.line, severity: "info", message: `falls back to ATen: ${f.op ?? "?"}${f.reason ? ` (${f.reason})` : ""}` });
        }
      }
    }
    return notes;
  }

  /** The stage names in order as the server that runs this compile publishes them. */
  useStages(stages: string[]): void {
    this.stageOrder = stages;
  }

  /** The stage the job is in: the one after the last event that arrived. A captured graph
   * (`capture_graph`) streams while capture goes on, and a long stage says what it is doing
   * (`progress`: its message is the answer); after `profile`, TorchInductor runs
   * when the compile asked for it (the `inductor` event, docs/events.md). */
  stage(): string {
    const last = this.events[this.events.length - 1]?.stage;
    if (!last) return "starting";
    if (last === "done" || last === "error") return last;
    if (last === "capture_graph") return "capture";
    const event = this.events[this.events.length - 1];
    if (event.stage === "progress") return event.data.message;
    const next = this.stageOrder[this.stageOrder.indexOf(last) + 1];
    if (next === undefined && last === "profile" && this.trace.data("source")?.options?.inductor) {
      return "inductor";
    }
    return next ?? "done";
  }

  /** One line for the status bar: kernels and time, or the error. */
  summary(): string {
    const error = this.trace.error;
    if (error) return `${error.kind ?? "error"}: ${(error.message ?? "").split("\n")[0].slice(0, 80)}`;
    const profile = this.trace.data("profile");
    const n = this.kernels().length;
    const time = profile?.measured && typeof profile.kernelscope_ms === "number"
      ? ` · ${profile.kernelscope_ms.toFixed(3)} ms (eager ${profile.eager_ms?.toFixed(3)} ms)` : "";
    return `${n} kernel${n === 1 ? "" : "s"}${time}${this.inductorSummary()}`;
  }

  /** Inductor after `done` (a follow-up): still running, lost, failed, or its time. */
  private inductorSummary(): string {
    const state = followUpState(this.trace, "inductor");
    if (state === "running") return " · Inductor running";
    if (state === "lost") return " · Inductor did not finish";
    if (state !== "done") return "";
    const ind = inductorOf(this.trace);
    if (ind?.error) return " · Inductor failed";
    return ind?.measured && typeof ind.inductor_ms === "number" ? ` · Inductor ${ind.inductor_ms.toFixed(3)} ms` : "";
  }
}
