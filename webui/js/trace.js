// A trace: the StageEvents of one compile, in order, as docs/events.md defines them.
// Panes read stages from here; nothing else in the UI knows how events arrive.
// The types are the ones generated from docs/events.schema.json (webui/types/events.d.ts):
// `trace.data("memory")` is a Memory payload, and webui/tsconfig.json checks every read.

/** @typedef {import("../types/events").StageEvent} StageEvent */
/** @typedef {import("../types/events").StageName} StageName */
/** @typedef {import("../types/events").GraphStage} GraphStage */
/** @typedef {import("../types/events").Payloads} Payloads */
/** @typedef {import("../types/events").ScheduledKernel & { gid: number }} TraceKernel */

// Stage names, in order, as the server publishes them (GET /api/schema, generated from
// compiler/events/types.py); filled in place by loadStages() before the panes are built.
// FOLLOW_UPS come after our own result, when asked for (`inductor`).
/** @type {StageName[]} */
export const STAGES = [];
/** @type {StageName[]} */
export const FOLLOW_UPS = [];

export async function loadStages(getSchema) {
  const schema = await getSchema();
  STAGES.splice(0, STAGES.length, ...schema.stages);
  FOLLOW_UPS.splice(0, FOLLOW_UPS.length, ...(schema.follow_ups ?? []));
}

// A big stored trace is served as its head, each graph's entries in `capture` .. `compile`
// a stub naming the part that holds them ({id, part, name, kind, ..., lengths}), and one
// part per graph: {graphs: {stage: [entry]}} (docs/server.md, "A model's trace").
/** @param {any} entry */
export const isStub = (entry) => typeof entry?.part === "string";

// A part's entries in place of their stubs, in the events (changed in place): the same
// merge the server makes when it reads a trace whole (server/store/parts.py `merge`).
/** @param {StageEvent[]} events @param {{graphs?: Record<string, any[]>}} part */
export function mergePart(events, part) {
  const graphs = part?.graphs ?? {};
  const captured = new Map((graphs.capture ?? []).map((g) => [g.id, g]));
  // A TORCH_TRACE log's part also holds its Dynamo compile's entry of `capture.compiles`.
  const compiles = new Map((/** @type {any} */ (part)?.compiles ?? []).map((c) => [c.compile_id, c]));
  for (const event of events) {
    const data = /** @type {any} */ (event.data);
    if (event.stage === "capture_graph" && isStub(data)) {
      /** @type {any} */ (event).data = captured.get(data.id) ?? data;
      continue;
    }
    if (compiles.size && event.stage === "capture" && Array.isArray(data?.compiles)) {
      data.compiles = data.compiles.map((c) => (isStub(c) ? compiles.get(c.compile_id) ?? c : c));
    }
    const entries = graphs[event.stage];
    if (!entries || !Array.isArray(data?.graphs)) continue;
    const byId = new Map(entries.map((g) => [g.id, g]));
    data.graphs = data.graphs.map((g) => (isStub(g) ? byId.get(g.id) ?? g : g));
  }
}

export class Trace {
  constructor() {
    /** @type {StageEvent[]} */
    this.events = [];
    /** @type {Map<StageName, StageEvent>} */
    this.byStage = new Map();
    /** @type {Payloads["capture_graph"][]} the graphs streamed ahead of `capture` */
    this.parts = [];
    /** @type {Payloads["error"] | null} */
    this.error = null;
    /** @type {Payloads["done"] | null} */
    this.done = null;
    /** @type {Record<string, string>} each follow-up's state, as the server last said */
    this.followUps = {};
    /** @type {string | null} the stored trace whose parts are still to ask for */
    this.stored = null;
  }

  // The parts that hold graphs `ids` (every graph: null) and are not here yet.
  /** @param {number[] | null} ids @returns {string[]} */
  missingParts(ids) {
    const keep = ids ? new Set(ids) : null;
    const keys = new Set();
    for (const event of this.events) {
      for (const g of /** @type {any} */ (event.data)?.graphs ?? []) {
        if (isStub(g) && (!keep || keep.has(g.id))) keys.add(g.part);
      }
    }
    return [...keys];
  }

  /** @param {{graphs?: Record<string, any[]>}} part */
  addPart(part) {
    mergePart(this.events, part);
  }

  // Adds one event; returns false for a duplicate (same seq seen before).
  /** @param {StageEvent} event */
  add(event) {
    if (this.events.some((e) => e.seq === event.seq)) return false;
    this.events.push(event);
    this.byStage.set(event.stage, event);
    if (event.stage === "capture_graph") this.parts.push(event.data);
    if (event.stage === "error") this.error = event.data;
    if (event.stage === "done") this.done = event.data;
    if (event.stage === "gpu_stages") this.mergeGpuStages(event.data);
    return true;
  }

  // The `gpu_stages` follow-up (Triton's stages compiled offline, after the result): each
  // kernel's report goes into its entry of `compile`, where the panes read a build's.
  /** @param {import("../types/events").GpuStages} data */
  mergeGpuStages(data) {
    for (const g of data.graphs ?? []) {
      const built = this.graph("compile", g.id);
      for (const k of g.kernels ?? []) {
        const entry = built?.kernels.find((e) => e.name === k.name);
        if (!entry) continue;
        const { ms: _ms, cache_hit: _hit, ...report } = k;
        Object.assign(entry, report);
      }
    }
  }

  /**
   * @template {StageName} S
   * @param {S} stage
   * @returns {Payloads[S] | null}
   */
  data(stage) {
    const event = /** @type {import("../types/events").EventOf<S> | undefined} */ (
      this.byStage.get(stage));
    return event?.data ?? null;
  }

  /** @param {StageName} stage */
  ms(stage) {
    return this.byStage.get(stage)?.ms ?? null;
  }

  /** @param {StageName} stage */
  has(stage) {
    return this.byStage.has(stage);
  }

  // The per-graph entries of a stage that carries `graphs` (capture .. compile); before
  // `capture` arrives, its graphs so far are the ones streamed one by one.
  /**
   * @template {GraphStage} S
   * @param {S} stage
   * @returns {Payloads[S]["graphs"]}
   */
  graphs(stage) {
    const data = this.data(stage);
    if (!data && stage === "capture") return this.parts;
    const graphs = data?.graphs ?? [];
    return graphs.some(isStub)
      ? /** @type {Payloads[S]["graphs"]} */ (/** @type {any[]} */ (graphs).filter((g) => !isStub(g)))
      : graphs;
  }

  // Every graph of a stage, a stub for one whose part has not been asked for yet.
  /** @param {GraphStage} stage @returns {any[]} */
  graphsOrStubs(stage) {
    const data = this.data(stage);
    if (!data && stage === "capture") return this.parts;
    return data?.graphs ?? [];
  }

  /**
   * @template {GraphStage} S
   * @param {S} stage
   * @param {number} id
   * @returns {Payloads[S]["graphs"][number] | null}
   */
  graph(stage, id) {
    return this.graphs(stage).find((g) => g.id === id) ?? null;
  }

  get traceId() {
    return this.done?.trace_id ?? null;
  }

  // Kernels across all graphs, in execution order, each with its graph id.
  /** @returns {TraceKernel[]} */
  kernels() {
    if (!this.graphs("scheduling").length && this.data("capture")?.log) return loggedKernels(this);
    return this.graphs("scheduling").flatMap((g) => g.kernels.map((k) => ({ ...k, gid: g.id })));
  }
}

// A trace opened from a TORCH_TRACE log has no scheduling (a log holds no fusion
// decisions): its kernels are Inductor's generated ones, each with the FX nodes it covers
// (the `inductor` event) and their user lines, so provenance reaches them whole.
function loggedKernels(trace) {
  const lines = new Map(trace.graphs("capture").flatMap((g) =>
    (g.nodes ?? []).map((n) => [`${g.id}:${n.name}`, n.line])));
  const seen = new Set();
  return (trace.data("inductor")?.kernels ?? []).filter((k) => k.language && k.graph != null)
    .filter((k) => !seen.has(`${k.graph}:${k.name}`) && seen.add(`${k.graph}:${k.name}`))
    .map((k) => ({ name: k.name, gid: k.graph, kind: k.kind || "kernel", origins: k.nodes ?? [],
      lines: [...new Set((k.nodes ?? []).map((n) => lines.get(`${k.graph}:${n}`))
        .filter((x) => x != null))].sort((a, b) => a - b),
      buffers: [], reads: [], writes: [], numel: null, rnumel: null, module: null, modules: [] }));
}

// TorchInductor on the same graphs: the `inductor` event (after our result), or, in a trace
// stored before that event existed, what its `profile` carried (no per-kernel times).
export function inductorOf(trace) {
  const own = trace.data("inductor");
  if (own) return own;
  const p = trace.data("profile");
  if (!p?.inductor) return null;
  return { ...p.inductor, measured: p.inductor_ms != null, inductor_ms: p.inductor_ms ?? null,
    device: p.device ?? "" };
}

// A follow-up stage after `done` (Inductor): "done" once its event is here, else what the
// server says ("running", "lost"), "running" until it has; null when `done` lists none
// (a trace from before follow-ups: its Inductor ran before `done`, or not at all).
/** @param {Trace} trace @param {StageName} stage */
export function followUpState(trace, stage) {
  if (trace.has(stage)) return "done";
  if (!trace.done) return null;
  if (!(trace.done.follow_ups ?? []).includes(stage)) return null;
  return trace.followUps[stage] ?? "running";
}

// Is a follow-up of this trace still to come?
/** @param {Trace} trace */
export function followUpsPending(trace) {
  return (trace.done?.follow_ups ?? [])
    .some((s) => followUpState(trace, /** @type {StageName} */ (s)) === "running");
}

// Was Inductor asked for (the compile's options)?
// The TORCH_TRACE log's trace and graph a rebuilt graph's snippet names on its first line
// (the header compiler/trace/rebuild.py writes), or null.
const REBUILT = /^# Rebuilt by Kernelscope from the TORCH_TRACE log of trace ([\w-]+), graph (\d+)$/m;
export function rebuiltFrom(trace) {
  const m = (trace.data("source")?.code ?? "").split("\n", 1)[0].match(REBUILT);
  return m ? { trace: m[1], graph: Number(m[2]) } : null;
}

export function inductorAsked(trace) {
  return Boolean(trace.data("source")?.options?.inductor) || Boolean(inductorOf(trace));
}

// The same trace seen through a graph filter: `graphs(stage)` and `graph(stage, id)` keep
// only the graphs whose id is in `ids` (the forward or backward tab); everything else is
// the trace itself. Panes render a view exactly as they render a trace.
/**
 * @param {Trace} trace
 * @param {number[] | null} ids
 * @returns {Trace}
 */
export function graphView(trace, ids) {
  if (!ids) return trace;
  const keep = new Set(ids);
  const view = Object.create(trace);
  view.graphs = (stage) => trace.graphs(stage).filter((g) => keep.has(g.id));
  view.graph = (stage, id) => (keep.has(id) ? trace.graph(stage, id) : null);
  view.kernels = () => trace.kernels().filter((k) => keep.has(k.gid));
  return view;
}

// One label per captured graph: its kind (forward, backward, inference) when the capture
// stage says, and its Dynamo compile with the code it compiled (a function, or the rest of
// one after a graph break: Dynamo's `torch_dynamo_resume_in_f_at_22`).
/** @param {Trace} trace */
export function graphLabels(trace) {
  const compiles = new Map((trace.data("capture")?.compiles ?? []).map((c) => [c.compile_id, c]));
  const what = (c) => {
    if (!c?.function) return null;
    const resume = /^torch_dynamo_resume_in_(\w+)_at_(\d+)$/.exec(c.function);
    return resume ? `${resume[1]} after line ${resume[2]}` : c.function;
  };
  return trace.graphsOrStubs("capture").map((g) => ({
    id: g.id,
    kind: g.kind ?? null,
    label: `${g.kind ?? "graph"} ${g.id}`,
    title: [g.kind && `${g.kind} graph`,
      g.compile_id && [`Dynamo compile ${g.compile_id}`, what(compiles.get(g.compile_id))]
        .filter(Boolean).join(": "),
      `${g.nodes?.length ?? g.lengths?.nodes ?? 0} nodes`].filter(Boolean).join(" · "),
  }));
}
