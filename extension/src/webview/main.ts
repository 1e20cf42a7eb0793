/**
 * The Kernelscope panel's script: the web UI's own panes (webui/js/panes, bundled at build
 * time), fed with the StageEvents the extension host posts. Like webui/js/main.js it keeps
 * one Trace and one SelectionBus; unlike it, it has no editor (the user's VS Code editor is
 * the source pane) and no network: clicks and hovers go to the host as messages, and the
 * editor's cursor comes back as a selection. State is kept with setState, so a hidden or
 * restored panel shows the same trace without retainContextWhenHidden.
 */

import type { HostToWebview, TraceTitle, TracePart, WebviewState, WebviewToHost, StageEvent } from "../protocol";
import { isHostToWebview, traceEvents } from "../protocol";
import { answerHighlight, connectHighlight, highlight } from "./highlight";
import { GraphTabs, PartRequests } from "./graphs";
import WORKER_SOURCE from "layout-worker-source";
import { layoutWith } from "../../../webui/js/graphlayout.js";
import * as traceModule from "../../../webui/js/trace.js";
import { SelectionBus, buildIndex, fromSourceLine, isEmpty, union } from "../../../webui/js/provenance.js";
import { makeTabs } from "../../../webui/js/layout.js";
import { StatusStrip } from "../../../webui/js/panes/status.js";
import { ErrorBanner } from "../../../webui/js/panes/errors.js";
import { CodePane } from "../../../webui/js/panes/code.js";
import { DiffPane } from "../../../webui/js/panes/diff.js";
import { oursKernels } from "../../../webui/js/diff.js";
import cytoscapeModule from "../../../webui/vendor/cytoscape.esm.min.js";
import dagre from "../../../webui/vendor/cytoscape-dagre.min.js";
// The event contract as checked in (the server's GET /api/schema serves the same stages);
// the panes lay out one status chip per stage, so the stages are known before they are built.
import EVENT_SCHEMA from "../../../docs/events.schema.json";

/** The interface every web UI pane has (docs/webui.md). */
interface Pane {
  el: HTMLElement;
  reset(): void;
  update(trace: unknown, stage: string): void;
  select(selection: unknown): void;
  shown?(): void;
  scrollToSelection?(): void;
}
type Selection = ReturnType<typeof fromSourceLine>;
const { Trace, graphView, mergePart } = traceModule;

/**
 * The analysis tabs, in order: webui/js/panes/<name>.js, class <Name>Pane. They are bundled
 * by a glob import (every module of webui/js/panes goes into dist/webview.js), so a pane the
 * web UI adds is one name here, and one this webui checkout lacks is left out.
 */
const TAB_PANES = ["graph", "ir", "modules", "fusion", "memory", "timings", "guards", "output"];

type PaneClass = new (ctx: unknown) => Pane;

async function paneClass(name: string): Promise<PaneClass | null> {
  try {
    const mod = await import(`../../../webui/js/panes/${name}.js`) as Record<string, unknown>;
    const cls = mod[`${name[0].toUpperCase()}${name.slice(1)}Pane`];
    return typeof cls === "function" ? (cls as PaneClass) : null;
  } catch {
    return null;
  }
}

/** The stages before any pane is built (the status strip lays out one chip per stage, and
 * one per follow-up: the stages the server runs after `done`). */
async function setStages(stages: string[], followUps: string[]): Promise<void> {
  const t = traceModule as Record<string, unknown>;
  if (typeof t.setStages === "function") t.setStages(stages);
  else if (typeof t.loadStages === "function") await t.loadStages(async () => ({ stages, follow_ups: followUps }));
}

interface VsCodeApi {
  postMessage(message: WebviewToHost): void;
  getState(): WebviewState | undefined;
  setState(state: WebviewState): void;
}
declare function acquireVsCodeApi(): VsCodeApi;

type Ctx = ReturnType<typeof makeContext>;
type DiffMessage = Extract<HostToWebview, { type: "diff" }>;
/** A `trace` message with its events parsed (`text`: as the JSON text they came in). */
type TraceMessage = { title: TraceTitle; events: StageEvent[]; stored?: string; text?: string; parts?: Record<string, string> };

interface PanelState {
  trace: InstanceType<typeof Trace>;
  index: ReturnType<typeof buildIndex>;
  title: TraceTitle | null;
  tab?: string;
  /** A big stored trace's id: its graphs' parts are asked for when shown. */
  stored: string | null;
  /** The graphs the panes show (null: all), as the web UI's graph tabs choose them. */
  graphs: number[] | null;
}

const byId = (id: string) => document.getElementById(id) as HTMLElement;

/** makeTabs remembers the last tab in localStorage; a webview may have none. */
function provideLocalStorage(): void {
  try {
    void window.localStorage.length;
  } catch {
    const memory = new Map<string, string>();
    Object.defineProperty(window, "localStorage", { value: {
      getItem: (k: string) => memory.get(k) ?? null, setItem: (k: string, v: string) => memory.set(k, String(v)),
      removeItem: (k: string) => memory.delete(k),
    } });
  }
}

/** cytoscape with dagre, set up once on first use (the graph pane's `ctx.cytoscape`). */
function cytoscapeLoader(): () => Promise<unknown> {
  let ready: Promise<unknown> | null = null;
  return () => {
    ready ??= Promise.resolve().then(() => {
      cytoscapeModule.use(dagre);
      return cytoscapeModule;
    });
    return ready;
  };
}

/**
 * The graph pane's `ctx.layout`: dagre in a worker, its script bundled into this one as text
 * (src/webview/layout.worker.ts) and started from a Blob URL, which the panel's CSP allows.
 * Where none starts, the graph pane lays out on the main thread, and says so on the console
 * and in `body[data-layout]` ("worker" once the worker has answered, "main" after a failure).
 */
function layoutWorker(): (elements: unknown[], options: unknown) => Promise<unknown> {
  const layout = layoutWith(
    () => new Worker(URL.createObjectURL(new Blob([WORKER_SOURCE], { type: "text/javascript" }))),
    (reason: string) => {
      document.body.dataset.layout = "main";
      console.warn(`Kernelscope: graph layout on the main thread (${reason})`);
    });
  return (elements, options) => layout(elements as never[], options).then((positions: unknown) => {
    document.body.dataset.layout = "worker";
    return positions;
  });
}

/** The panes' `ctx` (docs/webui.md): selection through `bus`, the editor through `post`. */
function makeContext(state: PanelState, bus: InstanceType<typeof SelectionBus>, post: (m: WebviewToHost) => void) {
  return {
    index: () => state.index,
    current: () => bus.current,
    hover: (sel: Selection) => bus.hover(sel),
    unhover: () => bus.unhover(),
    // A click in a pane pins the selection here and reveals its source lines in the editor.
    pin: (sel: Selection) => {
      bus.pin(sel);
      const lines = [...sel.lines].sort((a, b) => a - b);
      if (lines.length) post({ type: "reveal", lines });
    },
    clearPin: () => bus.clear(),
    kernelColour: (gid: number, name: string) => state.index.kernelColour.get(`${gid}:${name}`) ?? "#3a4256",
    cytoscape: cytoscapeLoader(),
    layout: layoutWorker(),
    highlight,
    revealLine: (line: number) => post({ type: "reveal", lines: [line] }),
  };
}

/**
 * The panel: the status strip, the code pane and the tabs over one Trace, fed by the host's
 * messages; like webui/js/main.js, without an editor or a network.
 */
class Panel {
  readonly state: PanelState;
  readonly bus = new SelectionBus();
  readonly status: InstanceType<typeof StatusStrip>;
  readonly banner: InstanceType<typeof ErrorBanner>;
  readonly code: Pane;
  readonly tabPanes: Pane[];
  readonly tabs: ReturnType<typeof makeTabs>;
  readonly diff: Pane & { show(a: unknown, b: unknown, groups: unknown[]): void };
  readonly graphTabs = new GraphTabs((ids) => void this.showGraphs(ids));
  readonly parts = new PartRequests((m) => this.post(m));
  private lastHover: number[] = [];
  /** A big stored trace's head as it came, by seq: what is saved (its parts are asked again). */
  private head: Map<number, StageEvent> | null = null;
  /** The saved events' JSON text, while the trace has `count` events. */
  private text: { json: string; count: number } | null = null;
  /** A save put off while events stream (`saveSoon`). */
  private saveTimer: ReturnType<typeof setTimeout> | null = null;

  constructor(private readonly vscode: VsCodeApi, paneClasses: PaneClass[], saved: WebviewState | undefined) {
    this.state = { trace: new Trace(), index: buildIndex(new Trace()), title: null, tab: saved?.tab,
      stored: null, graphs: null };
    const ctx = makeContext(this.state, this.bus, (m) => this.post(m));
    // Newer status strips take an onCancel (a Cancel button); older ones ignore the argument.
    const Strip = StatusStrip as unknown as new (opts?: { onCancel?: () => void }) => InstanceType<typeof StatusStrip>;
    this.status = new Strip({ onCancel: () => this.post({ type: "cancel" }) });
    this.banner = new ErrorBanner({ onLine: (line: number) => this.post({ type: "reveal", lines: [line] }) });
    byId("status-host").append(this.status.el, this.graphTabs.el, this.banner.el);
    this.code = new CodePane(ctx) as unknown as Pane;
    this.code.el.dataset.pane = "code";
    byId("code-host").append(this.code.el);
    this.tabPanes = paneClasses.map((Cls) => new Cls(ctx));
    this.tabs = makeTabs(byId("tabs"), byId("tab-host"), this.tabPanes, (pane: { shown?: () => void }) => pane.shown?.());
    this.diff = this.makeDiff(ctx);
    this.wireTabs();
    this.wireSelection();
  }

  get panes(): Pane[] {
    return [this.code, ...this.tabPanes];
  }

  post(m: WebviewToHost): void {
    this.vscode.postMessage(m);
  }

  /** The saved tab shown, a clicked tab saved, the shown pane laid out again on a resize. */
  private wireTabs(): void {
    if (this.state.tab) this.tabs.show(this.state.tab);
    byId("tabs").addEventListener("click", (e) => {
      const tab = (e.target as HTMLElement).closest<HTMLElement>("[data-tab]")?.dataset.tab;
      if (tab) { this.state.tab = tab; this.save(); }
    });
    window.addEventListener("resize", () => this.tabPanes.forEach((p) => !p.el.hidden && p.shown?.()));
  }

  /** A selection marks every pane and goes to the editor as hovered lines; Escape clears
   * it; a double-click on a kernel's header (or a wrapper's) opens its code as a document. */
  private wireSelection(): void {
    this.bus.subscribe((sel: Selection) => {
      this.code.select(sel);
      this.tabs.select(sel);
      document.body.classList.toggle("selecting", !isEmpty(sel));
      const lines = [...sel.lines].sort((a, b) => a - b);
      if (!sameLines(lines, this.lastHover)) {
        this.lastHover = lines;
        this.post({ type: "hover", lines });
      }
    });
    document.addEventListener("keydown", (e) => { if (e.key === "Escape") this.bus.clear(); });
    byId("code-host").addEventListener("dblclick", (e) => this.openKernel(e.target as HTMLElement));
  }

  private openKernel(target: HTMLElement): void {
    const section = target.closest<HTMLElement>("section.kernel");
    if (!section || !target.closest(".kernel-head")) return;
    const gid = Number(section.dataset.graph ?? 0);
    const kernel = section.classList.contains("wrapper") ? "wrapper" : section.dataset.kernel;
    if (kernel && !section.classList.contains("extern")) this.post({ type: "openKernel", gid, kernel });
  }

  /** The state a hidden or restored panel comes back to; a big stored trace as its head. */
  save(): void {
    if (this.saveTimer !== null) clearTimeout(this.saveTimer);
    this.saveTimer = null;
    const { title, trace, tab, stored, graphs } = this.state;
    this.vscode.setState({ title, events: this.eventsText(), followUps: trace.followUps, tab,
      ...(stored ? { stored, graphs } : {}) });
  }

  /**
   * A save while events stream: at most one per SAVE_MS, as each sends the whole trace's
   * text to the host (one per event was quadratic in a model's compile). `done`, any other
   * message, and the panel being hidden or closed save at once.
   */
  saveSoon(): void {
    this.saveTimer ??= setTimeout(() => this.save(), SAVE_MS);
  }

  /** A save put off by `saveSoon`, made now (the panel is being hidden or closed). */
  flush(): void {
    if (this.saveTimer !== null) this.save();
  }

  /** The events to save as JSON text: the events that came since the last save added to
   * the text saved then (the trace's events are only ever appended). */
  private eventsText(): string {
    const events = this.state.trace.events;
    const head = this.head;
    const json = (list: StageEvent[]) => JSON.stringify(head ? list.map((e) => head.get(e.seq) ?? e) : list);
    const text = this.text;
    if (!text || text.count > events.length) {
      this.text = { json: json(events), count: events.length };
    } else if (text.count < events.length) {
      const added = json(events.slice(text.count)).slice(1);
      this.text = { json: text.count ? `${text.json.slice(0, -1)},${added}` : `[${added}`, count: events.length };
    }
    return this.text!.json;
  }

  setTitle(title: TraceTitle | null): void {
    this.state.title = title;
    byId("ks-title").textContent = title ? `${title.file} · ${title.region}` : "Kernelscope";
    byId("ks-hint").textContent = title?.traceId ? `trace ${title.traceId}` : title ? "" : byId("ks-hint").textContent;
  }

  reset(title: TraceTitle | null): void {
    this.closeDiff(); // a new trace leaves the diff
    this.state.trace = new Trace();
    this.state.index = buildIndex(this.state.trace);
    this.state.stored = null;
    this.state.graphs = null;
    this.head = null;
    this.text = null;
    this.graphTabs.render(this.state.trace, null);
    this.bus.clear();
    this.banner.reset();
    this.status.reset();
    this.code.reset();
    this.tabs.reset();
    this.tabs.refresh();
    this.setTitle(title);
  }

  /** As webui/js/main.js: the index once for all the events, each stage once to each pane
   * (the code pane now, a tab's pane when it is first shown). */
  handleAll(events: StageEvent[], live: boolean): void {
    const trace = this.state.trace;
    const added = events.filter((event) => trace.add(event));
    if (!added.length) return;
    this.state.index = buildIndex(trace);
    for (const event of added) this.announce(event, live);
    if (added.some((e) => e.stage === "capture" || e.stage === "capture_graph")) {
      this.graphTabs.render(trace, this.state.graphs);
    }
    this.updatePanes(added.map((e) => e.stage));
    this.bus.emit();
    this.tabs.refresh();
  }

  /** Each stage once to the code pane now and to a tab's pane when it is shown, through the
   * graphs chosen. */
  private updatePanes(stages: string[]): void {
    const view = graphView(this.state.trace, this.state.graphs);
    for (const stage of new Set(stages)) {
      this.code.update(view, stage);
      this.tabs.update(view, stage);
    }
  }

  /** A stored trace; a big one (`stored`: its head) opens on its first graph (or the graphs
   * `graphs` names), whose parts are asked for before the panes draw, as webui/js/main.js
   * opens one. Saved once drawn. */
  async showTrace(m: TraceMessage, graphs?: number[] | null): Promise<void> {
    this.reset(m.title);
    const trace = this.state.trace;
    if (m.stored) {
      trace.stored = m.stored;
      this.state.stored = m.stored;
      this.parts.give(m.stored, m.parts ?? {});
      this.head = new Map(m.events.map((e) => [e.seq, shallow(e)]));
      const first = (m.events.find((e) => e.stage === "capture")?.data as { graphs?: Array<{ id: number }> })?.graphs?.[0];
      this.state.graphs = graphs !== undefined ? graphs : first ? [first.id] : null;
      const head = new Trace();
      for (const e of m.events) head.add(e);
      const parts = await this.askParts(head.missingParts(this.state.graphs));
      if (trace !== this.state.trace) return; // a newer trace came meanwhile
      for (const part of parts ?? []) mergePart(m.events, part);
    }
    if (m.text) this.text = { json: m.text, count: m.events.length };
    this.handleAll(m.events, false);
    this.save();
  }

  /** The graph tabs: the panes show graphs `ids` (null: all), their parts asked for first. */
  async showGraphs(ids: number[] | null): Promise<void> {
    const trace = this.state.trace;
    const keys = this.state.stored ? trace.missingParts(ids) : [];
    if (keys.length) {
      const parts = await this.askParts(keys);
      if (trace !== this.state.trace || !parts) return;
      for (const part of parts) trace.addPart(part);
      this.state.index = buildIndex(trace);
    }
    this.state.graphs = ids;
    this.code.reset();
    this.tabs.reset();
    this.updatePanes(trace.events.map((e) => e.stage));
    this.graphTabs.render(trace, ids);
    this.bus.emit();
    this.tabs.refresh();
    this.tabPanes.forEach((p) => !p.el.hidden && p.shown?.());
    this.save();
  }

  /** The stored trace's parts `keys`, from the host; null (the banner says why) when one
   * cannot be read. */
  private async askParts(keys: string[]): Promise<TracePart[] | null> {
    const stored = this.state.stored;
    if (!keys.length || !stored) return [];
    document.body.dataset.loadingParts = keys.join(",");
    try {
      return await Promise.all(keys.map((k) => this.parts.ask(stored, k)));
    } catch (err) {
      this.banner.show({ kind: "client", message: `cannot load the graph: ${(err as Error).message}` } as never);
      return null;
    } finally {
      delete document.body.dataset.loadingParts;
    }
  }

  /** One event in the status strip, the error banner and the title (the trace's id). */
  private announce(event: StageEvent, live: boolean): void {
    this.status.update(this.state.trace, event, live);
    if (event.stage === "error") this.banner.show(event.data as never);
    if (event.stage === "done" && this.state.title) {
      this.setTitle({ ...this.state.title, traceId: (event.data.trace_id as string | undefined) ?? null });
    }
  }

  /** After `done` the host polls the server for the follow-ups (Inductor) and posts what it
   * says: the status strip and the Timings pane show each one running, filled in, or lost,
   * as webui/js/main.js shows them. */
  followUps(states: Record<string, string>, events: StageEvent[]): void {
    const trace = this.state.trace;
    trace.followUps = { ...states };
    this.handleAll(events, false);
    this.status.followUps(trace);
    const view = graphView(trace, this.state.graphs);
    for (const stage of Object.keys(states)) this.tabs.update(view, stage);
  }

  /** The pinned (or hovered) selection of the editor's lines that have provenance. */
  selectLines(m: Extract<HostToWebview, { type: "selectLines" }>): void {
    const lines = m.lines.filter((l) => this.state.index.sourceLines.has(l));
    if (!lines.length) {
      if (m.pin) this.bus.clear();
      else this.bus.unhover();
      return;
    }
    const sel = lines.map((l) => fromSourceLine(this.state.index, l)).reduce((a, b) => union(a, b));
    if (m.pin) {
      this.bus.pin(sel);
      this.code.scrollToSelection?.();
    } else {
      this.bus.hover(sel);
    }
  }

  /** Compare With Previous: the web UI's Diff pane over the whole panel, until "back". */
  private makeDiff(ctx: Ctx): Panel["diff"] {
    const diff = new DiffPane(ctx) as unknown as Panel["diff"];
    diff.el.dataset.pane = "diff";
    byId("ks-diff-host").append(diff.el);
    byId("ks-diff-close").addEventListener("click", (e) => {
      e.preventDefault();
      this.closeDiff();
    });
    return diff;
  }

  showDiff(m: DiffMessage): void {
    const side = (s: DiffMessage["a"], tag: string) => {
      const trace = new Trace();
      for (const e of s.events) trace.add(e);
      return { label: `${tag} · trace ${s.id}`, href: s.href, trace, kernels: oursKernels(trace) };
    };
    this.diff.show(side(m.a, "A"), side(m.b, "B"), m.groups);
    byId("ks-diff-title").textContent = `${m.a.id} → ${m.b.id}`;
    byId("ks-diff").hidden = false;
    document.body.classList.add("ks-diffing");
  }

  private closeDiff(): void {
    document.body.classList.remove("ks-diffing");
    byId("ks-diff").hidden = true;
  }

  /** A host message; every one but a highlight answer and a diff is saved with the state. */
  onMessage(m: HostToWebview): void {
    switch (m.type) {
      case "reset":
        this.reset(m.title);
        this.status.start();
        break;
      case "event":
        this.handleAll([m.event], true);
        if (m.event.stage !== "done") return this.saveSoon();
        break;
      case "trace": {
        const events = traceEvents(m.events);
        const text = typeof m.events === "string" ? m.events : undefined;
        if (events) void this.showTrace({ title: m.title, events, stored: m.stored, text, parts: m.parts }); // saves itself once drawn
        return;
      }
      case "part":
        this.parts.answer(m);
        return;
      case "followUps":
        this.followUps(m.states, m.events);
        break;
      case "selectLines":
        this.selectLines(m);
        break;
      case "highlighted":
        answerHighlight(m);
        return;
      case "diff":
        this.showDiff(m);
        return;
      case "failure":
        // No event came: the strip only needs to stop as a failure would stop it.
        this.status.update(this.state.trace, { stage: "error", data: { stage: null } } as never, false);
        this.banner.show({ kind: m.kind, message: m.message } as never);
        break;
    }
    this.save();
  }

  /** A restored panel tells the host what it restored (first: a big stored trace's parts are
   * asked of the host, which must know the trace), and shows its saved trace. */
  restore(saved: WebviewState | undefined): void {
    const events = saved ? traceEvents(saved.events) ?? [] : [];
    const restored = events.length > 0;
    this.post({ type: "ready", restored });
    if (restored && saved?.title) {
      this.post({ type: "restore", title: saved.title, events: saved.events,
        ...(saved.followUps ? { followUps: saved.followUps } : {}), ...(saved.stored ? { stored: saved.stored } : {}) });
    }
    if (restored && saved) {
      const title = saved.title ?? { file: "", region: "" };
      const text = typeof saved.events === "string" ? saved.events : undefined;
      const shown = this.showTrace({ title, events, stored: saved.stored, text },
        saved.stored ? saved.graphs ?? null : undefined);
      const followUps = saved.followUps;
      if (followUps) void shown.then(() => this.onMessage({ type: "followUps", states: followUps, events: [] }));
    } else if (saved?.title) {
      this.setTitle(saved.title);
    }
    document.body.dataset.ready = "true";
  }
}

/** How long a save waits while events stream (`Panel.saveSoon`). */
const SAVE_MS = 500;

const sameLines = (a: number[], b: number[]) => a.length === b.length && a.every((x, i) => x === b[i]);
/** A copy of an event that a part's merge leaves as it was (the merge sets `data` and
 * `data.graphs`). */
const shallow = (e: StageEvent): StageEvent => {
  const data = e.data as unknown;
  return (data && typeof data === "object" ? { ...e, data: { ...data } } : { ...e }) as StageEvent;
};

function start(paneClasses: PaneClass[]): void {
  const vscode = acquireVsCodeApi();
  connectHighlight((m) => vscode.postMessage(m));
  provideLocalStorage();
  const saved = vscode.getState();
  const panel = new Panel(vscode, paneClasses, saved);
  window.addEventListener("message", (e: MessageEvent) => {
    if (isHostToWebview(e.data)) panel.onMessage(e.data);
  });
  document.addEventListener("visibilitychange", () => panel.flush());
  window.addEventListener("pagehide", () => panel.flush());
  panel.restore(saved);
  // For tests and debugging in the webview's developer tools.
  (window as unknown as { kernelscope: unknown }).kernelscope =
    { state: panel.state, bus: panel.bus, panes: panel.panes };
}

void (async () => {
  await setStages(EVENT_SCHEMA["x-stages"], EVENT_SCHEMA["x-follow-ups"]);
  const classes = await Promise.all(TAB_PANES.map(paneClass));
  start(classes.filter((c): c is PaneClass => c !== null));
})();
