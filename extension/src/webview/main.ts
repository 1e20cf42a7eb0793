/**
 * The Kernelscope panel's script: the web UI's own panes (webui/js/panes, bundled at build
 * time), fed with the StageEvents the extension host posts. Like webui/js/main.js it keeps
 * one Trace and one SelectionBus; unlike it, it has no editor (the user's VS Code editor is
 * the source pane) and no network: clicks and hovers go to the host as messages, and the
 * editor's cursor comes back as a selection. State is kept with setState, so a hidden or
 * restored panel shows the same trace without retainContextWhenHidden.
 */

import type { HostToWebview, TraceTitle, WebviewState, WebviewToHost, StageEvent } from "../protocol";
import { isHostToWebview } from "../protocol";
import { answerHighlight, connectHighlight, highlight } from "./highlight";
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
const { Trace } = traceModule;

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

function start(paneClasses: PaneClass[]): void {
  const vscode = acquireVsCodeApi();
  const post = (m: WebviewToHost) => vscode.postMessage(m);
  connectHighlight(post);

  // makeTabs remembers the last tab in localStorage; a webview may have none.
  try {
    void window.localStorage.length;
  } catch {
    const memory = new Map<string, string>();
    Object.defineProperty(window, "localStorage", { value: {
      getItem: (k: string) => memory.get(k) ?? null, setItem: (k: string, v: string) => memory.set(k, String(v)),
      removeItem: (k: string) => memory.delete(k),
    } });
  }

  let cytoscapeReady: Promise<unknown> | null = null;
  const loadCytoscape = () => {
    cytoscapeReady ??= Promise.resolve().then(() => {
      cytoscapeModule.use(dagre);
      return cytoscapeModule;
    });
    return cytoscapeReady;
  };

  const $ = (id: string) => document.getElementById(id) as HTMLElement;
  const saved = vscode.getState();
  const state: { trace: InstanceType<typeof Trace>; index: ReturnType<typeof buildIndex>; title: TraceTitle | null; tab?: string } =
    { trace: new Trace(), index: buildIndex(new Trace()), title: null, tab: saved?.tab };
  const bus = new SelectionBus();

  const sameLines = (a: number[], b: number[]) => a.length === b.length && a.every((x, i) => x === b[i]);
  let lastHover: number[] = [];

  const ctx = {
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
    cytoscape: loadCytoscape,
    highlight,
    revealLine: (line: number) => post({ type: "reveal", lines: [line] }),
  };

  // Newer status strips take an onCancel (a Cancel button); older ones ignore the argument.
  const Strip = StatusStrip as unknown as new (opts?: { onCancel?: () => void }) => InstanceType<typeof StatusStrip>;
  const status = new Strip({ onCancel: () => post({ type: "cancel" }) });
  const banner = new ErrorBanner({ onLine: (line: number) => post({ type: "reveal", lines: [line] }) });
  $("status-host").append(status.el, banner.el);

  const code = new CodePane(ctx) as unknown as Pane;
  const tabPanes = paneClasses.map((Cls) => new Cls(ctx));
  const panes = [code, ...tabPanes];
  code.el.dataset.pane = "code";
  $("code-host").append(code.el);
  const tabs = makeTabs($("tabs"), $("tab-host"), tabPanes, (pane: { shown?: () => void }) => pane.shown?.());
  if (state.tab) tabs.show(state.tab);
  $("tabs").addEventListener("click", (e) => {
    const tab = (e.target as HTMLElement).closest<HTMLElement>("[data-tab]")?.dataset.tab;
    if (tab) { state.tab = tab; save(); }
  });
  window.addEventListener("resize", () => tabPanes.forEach((p) => !p.el.hidden && p.shown?.()));

  bus.subscribe((sel: Selection) => {
    code.select(sel);
    tabs.select(sel);
    document.body.classList.toggle("selecting", !isEmpty(sel));
    const lines = [...sel.lines].sort((a, b) => a - b);
    if (!sameLines(lines, lastHover)) {
      lastHover = lines;
      post({ type: "hover", lines });
    }
  });
  document.addEventListener("keydown", (e) => { if (e.key === "Escape") bus.clear(); });

  // Double-click a kernel's header (or a wrapper's) to open its code as a read-only document.
  $("code-host").addEventListener("dblclick", (e) => {
    const section = (e.target as HTMLElement).closest<HTMLElement>("section.kernel");
    if (!section || !(e.target as HTMLElement).closest(".kernel-head")) return;
    const gid = Number(section.dataset.graph ?? 0);
    const kernel = section.classList.contains("wrapper") ? "wrapper" : section.dataset.kernel;
    if (kernel && !section.classList.contains("extern")) post({ type: "openKernel", gid, kernel });
  });

  function save(): void {
    vscode.setState({ title: state.title, events: state.trace.events, followUps: state.trace.followUps, tab: state.tab });
  }

  function setTitle(title: TraceTitle | null): void {
    state.title = title;
    $("ks-title").textContent = title ? `${title.file} · ${title.region}` : "Kernelscope";
    $("ks-hint").textContent = title?.traceId ? `trace ${title.traceId}` : title ? "" : $("ks-hint").textContent;
  }

  function reset(title: TraceTitle | null): void {
    document.body.classList.remove("ks-diffing"); // a new trace leaves the diff
    $("ks-diff").hidden = true;
    state.trace = new Trace();
    state.index = buildIndex(state.trace);
    bus.clear();
    banner.reset();
    status.reset();
    code.reset();
    tabs.reset();
    tabs.refresh();
    setTitle(title);
  }

  function handle(event: StageEvent, live: boolean): void {
    handleAll([event], live);
  }

  // As webui/js/main.js: the index once for all the events, each stage once to each pane
  // (the code pane now, a tab's pane when it is first shown).
  function handleAll(events: StageEvent[], live: boolean): void {
    const trace = state.trace;
    const added = events.filter((event) => trace.add(event));
    if (!added.length) return;
    state.index = buildIndex(trace);
    for (const event of added) {
      status.update(trace, event, live);
      if (event.stage === "error") banner.show(event.data as never);
      if (event.stage === "done" && state.title) {
        setTitle({ ...state.title, traceId: (event.data.trace_id as string | undefined) ?? null });
      }
    }
    for (const stage of new Set(added.map((e) => e.stage))) {
      code.update(trace, stage);
      tabs.update(trace, stage);
    }
    bus.emit();
    tabs.refresh();
  }

  // After `done` the host polls the server for the follow-ups (Inductor) and posts what it
  // says: the status strip and the Timings pane show each one running, filled in, or lost,
  // as webui/js/main.js shows them.
  function followUps(states: Record<string, string>, events: StageEvent[]): void {
    const trace = state.trace;
    trace.followUps = { ...states };
    handleAll(events, false);
    status.followUps(trace);
    for (const stage of Object.keys(states)) tabs.update(trace, stage);
  }

  // Compare With Previous: the web UI's Diff pane over the whole panel, until "back".
  const diff = new DiffPane(ctx) as unknown as Pane & { show(a: unknown, b: unknown, groups: unknown[]): void };
  diff.el.dataset.pane = "diff";
  $("ks-diff-host").append(diff.el);
  $("ks-diff-close").addEventListener("click", (e) => {
    e.preventDefault();
    document.body.classList.remove("ks-diffing");
    $("ks-diff").hidden = true;
  });
  function showDiff(m: Extract<HostToWebview, { type: "diff" }>): void {
    const side = (s: typeof m.a, tag: string) => {
      const trace = new Trace();
      for (const e of s.events) trace.add(e);
      return { label: `${tag} · trace ${s.id}`, href: s.href, trace, kernels: oursKernels(trace) };
    };
    diff.show(side(m.a, "A"), side(m.b, "B"), m.groups);
    $("ks-diff-title").textContent = `${m.a.id} → ${m.b.id}`;
    $("ks-diff").hidden = false;
    document.body.classList.add("ks-diffing");
  }

  function onMessage(m: HostToWebview): void {
    switch (m.type) {
      case "reset":
        reset(m.title);
        status.start();
        break;
      case "event":
        handle(m.event, true);
        break;
      case "trace":
        reset(m.title);
        handleAll(m.events, false);
        break;
      case "followUps":
        followUps(m.states, m.events);
        break;
      case "selectLines": {
        const lines = m.lines.filter((l) => state.index.sourceLines.has(l));
        if (!lines.length) { if (m.pin) bus.clear(); else bus.unhover(); break; }
        const sel = lines.map((l) => fromSourceLine(state.index, l)).reduce((a, b) => union(a, b));
        if (m.pin) {
          bus.pin(sel);
          code.scrollToSelection?.();
        } else {
          bus.hover(sel);
        }
        break;
      }
      case "highlighted":
        answerHighlight(m);
        return;
      case "diff":
        showDiff(m);
        return;
      case "failure":
        // No event came: the strip only needs to stop as a failure would stop it.
        status.update(state.trace, { stage: "error", data: { stage: null } } as never, false);
        banner.show({ kind: m.kind, message: m.message } as never);
        break;
    }
    save();
  }

  window.addEventListener("message", (e: MessageEvent) => {
    if (isHostToWebview(e.data)) onMessage(e.data);
  });

  if (saved?.events?.length) {
    onMessage({ type: "trace", title: saved.title ?? { file: "", region: "" }, events: saved.events });
    if (saved.followUps) onMessage({ type: "followUps", states: saved.followUps, events: [] });
  }
  else if (saved?.title) setTitle(saved.title);
  document.body.dataset.ready = "true";
  post({ type: "ready", restored: !!saved?.events?.length });
  if (saved?.events?.length && saved.title) {
    post({ type: "restore", title: saved.title, events: saved.events, ...(saved.followUps ? { followUps: saved.followUps } : {}) });
  }

  // For tests and debugging in the webview's developer tools.
  (window as unknown as { kernelscope: unknown }).kernelscope = { state, bus, panes };
}

void (async () => {
  await setStages(EVENT_SCHEMA["x-stages"], EVENT_SCHEMA["x-follow-ups"]);
  const classes = await Promise.all(TAB_PANES.map(paneClass));
  start(classes.filter((c): c is PaneClass => c !== null));
})();
