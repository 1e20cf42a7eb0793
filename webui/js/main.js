// Boots the explorer: the editor and options on the left, the generated code in the
// middle, the analysis panes in tabs on the right. Compiling streams a job's events into a
// Trace and hands each one to every pane; a permalink (/t/<id>) replays a stored trace the
// same way, read-only; /diff/<a>/<b> compares two stored traces (diffpage.js). Provenance
// selections travel through one SelectionBus.

import { getSamples, getHealth, getTrace, startCompile, jobEvents, cancelJob, highlight,
  getSchema, getFollowUps, getRebuild, getPart } from "./api.js";
import { Editor } from "./editor.js";
import { loadCytoscape, libInfo } from "./libs.js";
import { layoutOffThread } from "./graphlayout.js";
import { Trace, graphView, graphLabels, loadStages, inductorOf, followUpsPending, rebuiltFrom,
  isStub, mergePart } from "./trace.js";
/** @typedef {import("../types/events").StageEvent} StageEvent */
import { SelectionBus, buildIndex, fromSourceLine, isEmpty } from "./provenance.js";
import { makeTabs, makeSplitter, makeMaximise, toast, initTheme, notFound } from "./layout.js";
import { nextTask, afterFrame } from "./dom.js";
import { OptionControls, fillChoices, fingerprint, unchangedNotes } from "./options.js";
import { StatusStrip } from "./panes/status.js";
import { ErrorBanner } from "./panes/errors.js";
import { CodePane } from "./panes/code.js";
import { LazyPane } from "./panes/lazy.js";
import { RunPanel, mountUpload } from "./upload.js";

// The analysis tabs, in order. Each pane's module is imported when its tab is first shown
// (panes/lazy.js), and all of them once the page has opened: the open fetches and runs only
// what the code pane needs. `id` and `title` are the pane class's own (checked on load).
const TABS = [
  { id: "graph", title: "Graph",
    load: async () => (await import("./panes/graph.js")).GraphPane },
  { id: "ir", title: "IR",
    load: async () => (await import("./panes/ir.js")).IrPane },
  { id: "modules", title: "Modules",
    load: async () => (await import("./panes/modules.js")).ModulesPane },
  { id: "fusion", title: "Fusion",
    load: async () => (await import("./panes/fusion.js")).FusionPane },
  { id: "memory", title: "Memory",
    load: async () => (await import("./panes/memory.js")).MemoryPane },
  { id: "timings", title: "Timings",
    load: async () => (await import("./panes/timings.js")).TimingsPane },
  { id: "guards", title: "Guards",
    load: async () => (await import("./panes/guards.js")).GuardsPane },
  { id: "output", title: "Output",
    load: async () => (await import("./panes/output.js")).OutputPane },
];

// A permalink's trace is asked for at once, beside the schema, samples and options.
const PERMALINK = location.pathname.match(/^\/t\/([^/]+)\/?$/);
const fetching = PERMALINK ? getTrace(decodeURIComponent(PERMALINK[1]), { split: true }) : null;
fetching?.catch(() => {}); // its error is read where it is awaited
// A big trace's first graph is its part `g0` (docs/server.md, "A model's trace"): asked for
// beside the head, not after it; a small trace has none (404, ignored).
const firstPart = PERMALINK
  ? getPart(decodeURIComponent(PERMALINK[1]), "g0").catch(() => null) : null;
await loadStages(getSchema); // before any pane is built: they lay out one chip per stage
// The page's own elements (index.html), by id: inputs, selects, buttons, links.
/** @type {(id: string) => any} */
const $ = (id) => document.getElementById(id);

const state = { trace: new Trace(), index: null, running: false, permalink: null,
  stale: false, graphs: null, jobId: null, abort: null, last: null, traceId: null,
  before: null, watch: 0 };
state.index = buildIndex(state.trace);
const bus = new SelectionBus();

// While the code differs from what was compiled, its lines no longer match the trace's.
const live = (fn) => (...args) => (state.stale ? undefined : fn(...args));
const ctx = {
  index: () => state.index,
  current: () => bus.current,
  hover: live((sel) => bus.hover(sel)),
  unhover: () => bus.unhover(),
  pin: live((sel) => bus.pin(sel)),
  clearPin: () => bus.clear(),
  kernelColour: (gid, name) => state.index.kernelColour.get(`${gid}:${name}`) ?? "#3a4256",
  cytoscape: loadCytoscape,
  layout: layoutOffThread,
  highlight,
  revealLine: (line) => editor.revealLine(line),
  showGraphs: (ids) => showGraphs(ids),
};

const editor = new Editor($("editor"), {
  onHoverLine: (line) => (line && state.index.sourceLines.has(line)
    ? ctx.hover(fromSourceLine(state.index, line)) : bus.unhover()),
  onClickLine: (line) => {
    if (!line || !state.index.sourceLines.has(line) || state.stale) return;
    bus.pin(fromSourceLine(state.index, line));
    code.scrollToSelection();
    ir.real?.scrollToSelection();
  },
  // The keyboard's way to the same selection: the cursor's line while the editor has focus.
  onCursorLine: (line) => {
    if (state.stale || !state.index.sourceLines.has(line)) return;
    bus.pin(fromSourceLine(state.index, line));
    code.scrollToSelection();
  },
  onChange: () => markStale(),
  onRun: () => compile(),
});

// CodeMirror loads at once, except on a permalink: there after its code pane is drawn.
if (!PERMALINK) editor.load();

const status = new StatusStrip({ onCancel: () => cancel() });
const banner = new ErrorBanner({ onLine: (line) => editor.revealLine(line) });
const graphTabs = document.createElement("nav");
graphTabs.className = "graph-tabs";
graphTabs.hidden = true;
const runPanel = new RunPanel((traceId, graph) => rebuildGraph(traceId, graph));
$("status-host").append(status.el, graphTabs, banner.el, runPanel.el);
mountUpload($("share"), { onError: (err) => banner.show(err) });

const code = new CodePane(ctx);
const tabPanes = TABS.map((spec) => new LazyPane(ctx, spec, () => tabs.refresh()));
const ir = tabPanes.find((p) => p.id === "ir");
// The built panes (a tab's stand-in until its pane is loaded), for tests and the console.
const panes = () => [code, ...tabPanes.map((p) => p.real ?? p)];
code.el.dataset.pane = "code";
$("code-host").append(code.el);
const tabs = makeTabs($("tabs"), $("tab-host"), tabPanes, (pane) => pane.shown?.());

const workspace = document.querySelector(".workspace");
const reflow = () => tabPanes.forEach((p) => !p.el.hidden && p.shown?.());
makeSplitter($("split-1"), workspace, "--w-editor", { onResize: reflow });
makeSplitter($("split-2"), workspace, "--w-code", { onResize: reflow });
makeMaximise(workspace, document.querySelectorAll(".col"), reflow);
window.addEventListener("resize", reflow);
initTheme($("theme"));

const optionControls = new OptionControls($("options-panel"), $("options-summary"));

bus.subscribe((sel) => {
  editor.mark({ selected: sel.lines });
  code.select(sel);
  tabs.select(sel);
  document.body.classList.toggle("selecting", !isEmpty(sel));
});
document.addEventListener("keydown", (e) => { if (e.key === "Escape") bus.clear(); });

function options() {
  return { device: $("opt-device").value, backend: $("opt-backend").value,
    ...optionControls.values() };
}

// Sets the option controls; values the controls do not offer are skipped.
function setOptions(opts = {}) {
  for (const [id, value] of [["opt-device", opts.device], ["opt-backend", opts.backend]]) {
    const select = $(id);
    if (value && [...select.options].some((o) => o.value === value)) select.value = value;
  }
  optionControls.set(opts);
}

function reset() {
  state.watch += 1;  // a follow-up watch of the trace before this one stops
  state.trace = new Trace();
  state.index = buildIndex(state.trace);
  state.graphs = null;
  bus.clear();
  banner.reset();
  runPanel.reset();
  status.reset();
  setStale(false);
  editor.mark({ lines: new Set(), selected: new Set(), error: null, breaks: new Set() });
  code.reset();
  tabs.reset();
  renderGraphTabs();
  tabs.refresh();
  setShare(null);
}

/** @param {StageEvent} event @param {boolean} isLive */
function handle(event, isLive) {
  handleAll([event], isLive);
}

// Events in order: the provenance index is built once for all of them, and each pane
// renders each stage once (a stored trace arrives whole).
/** @param {StageEvent[]} events @param {boolean} isLive */
function handleAll(events, isLive) {
  const trace = state.trace;
  const added = events.filter((event) => trace.add(event));
  if (!added.length) return;
  state.index = buildIndex(trace);
  const marks = { lines: state.index.sourceLines };
  for (const event of added) {
    status.update(trace, event, isLive);
    if (event.stage === "error") {
      banner.show(event.data, event.origin ?? null);
      marks.error = event.data.line ?? null;
    }
    if (event.stage === "done") setShare(event.data.trace_id ?? null);
    if (event.stage === "capture") {
      marks.breaks = new Set((event.data.graph_breaks ?? []).map((b) => b.line));
    }
  }
  // The editor's marks before the panes grow the page: one update, one small layout.
  editor.mark(marks);
  if (added.some((e) => e.stage === "capture" || e.stage === "capture_graph")) renderGraphTabs();
  updatePanes(added.map((e) => e.stage));
  bus.emit();
  tabs.refresh();
}

// Each stage once, in order, to the code pane now and to the tabs when each is shown.
function updatePanes(stages) {
  const view = graphView(state.trace, state.graphs);
  for (const stage of new Set(stages)) {
    code.update(view, stage);
    tabs.update(view, stage);
  }
}

// Forward / backward (or one tab per graph break) when a trace has more than one graph:
// every pane then shows the chosen graph only.
function renderGraphTabs() {
  const labels = graphLabels(state.trace);
  graphTabs.replaceChildren();
  graphTabs.hidden = labels.length < 2;
  if (graphTabs.hidden) return;
  const button = (ids, text, title) => {
    const b = document.createElement("button");
    b.className = "gtab";
    b.textContent = text;
    b.title = title;
    b.dataset.graphs = ids ? ids.join(",") : "all";
    b.classList.toggle("active", JSON.stringify(ids) === JSON.stringify(state.graphs));
    b.addEventListener("click", () => showGraphs(ids));
    return b;
  };
  const head = document.createElement("span");
  head.className = "hint";
  head.textContent = "graphs:";
  graphTabs.append(head, button(null, "all", "every graph"),
    ...labels.map((g) => button([g.id], g.label, g.title)));
}

// A big stored trace holds each graph apart (docs/server.md, "A model's trace"): the
// graphs a tab shows are asked for before it is drawn, once each.
async function showGraphs(ids) {
  const trace = state.trace;
  const keys = trace.stored ? trace.missingParts(ids) : [];
  if (keys.length) {
    document.body.dataset.loadingParts = keys.join(",");
    try {
      const parts = await Promise.all(keys.map((k) => getPart(trace.stored, k)));
      if (trace !== state.trace) return;
      for (const part of parts) trace.addPart(part);
    } catch (err) {
      banner.show({ kind: err.kind ?? "client", message: `cannot load the graph: ${err.message}` });
      return;
    } finally {
      delete document.body.dataset.loadingParts;
    }
    state.index = buildIndex(trace);
    editor.mark({ lines: state.index.sourceLines });
    runPanel.refresh();
  }
  state.graphs = ids;
  code.reset();
  tabs.reset();
  updatePanes(state.trace.events.map((e) => e.stage));
  renderGraphTabs();
  bus.emit();
  tabs.refresh();
  reflow();
}

// Edited since the compile: the result stays, marked stale, and provenance is off (its
// line numbers belong to the code that was compiled) until the next compile.
function markStale() {
  const source = state.trace.data("source");
  if (!source || state.running || state.permalink) return;
  const stale = editor.code !== source.code;
  if (stale !== state.stale) setStale(stale);
  const sample = $("samples");
  if (sample.value && sampleCode.get(sample.value) !== editor.code) sample.value = "";
}

function setStale(flag) {
  state.stale = flag;
  document.body.classList.toggle("stale", flag);
  status.setStale(flag);
  if (flag) {
    bus.clear();
    editor.mark({ lines: new Set(), selected: new Set(), error: null, breaks: new Set() });
  } else if (state.trace.has("source")) {
    editor.mark({ lines: state.index.sourceLines });
  }
}

async function compile() {
  if (state.running || state.permalink) return;
  state.running = true;
  document.body.classList.add("running");
  $("compile").disabled = true;
  const opts = options();
  const code = editor.code;
  state.before = state.traceId ?? state.before;  // the "diff with previous" link
  reset();
  status.start();
  state.abort = new AbortController();
  state.cancelling = false;
  try {
    const { job_id: jobId } = await startCompile(code, opts);
    state.jobId = jobId;
    status.running(true);
    for await (const event of jobEvents(jobId, state.abort.signal)) handle(event, true);
    watchFollowUps();
    if (state.cancelling) {  // the server's closing error is the kill we asked for
      banner.reset();
      status.cancelled();
    } else {
      noteUnchanged(code, opts);
    }
  } catch (err) {
    if (err.name === "AbortError" || state.abort?.signal.aborted || state.cancelling) {
      status.cancelled();
    } else {
      console.error(err);
      // No event came: the strip only needs to stop as a failure would stop it.
      status.update(state.trace, /** @type {any} */ ({ stage: "error", data: { stage: null } }), false);
      status.refused();
      banner.show({ kind: err.kind ?? "client", message: err.message });
    }
  } finally {
    state.running = false;
    state.jobId = null;
    status.running(false);
    document.body.classList.remove("running");
    $("compile").disabled = false;
  }
}

// Cancel asks the server to kill the job; its stream then ends with a `cancelled` error
// and a `done` whose partial trace is stored (and can be shared). Without a cancel API
// (an older server), or if the stream does not end soon, the UI stops listening.
async function cancel() {
  if (!state.running) return;
  state.cancelling = true;
  const jobId = state.jobId;
  const abort = state.abort;
  try {
    if (!jobId) throw new Error("the job has not started yet");
    await cancelJob(jobId);
    setTimeout(() => abort?.abort(), CANCEL_GRACE_MS);
  } catch (err) {
    toast(`The server could not cancel the job (${err.message}); stopped watching it.`);
    abort?.abort();
  }
}

const CANCEL_GRACE_MS = 5000;

function noteUnchanged(code, opts) {
  if (!state.trace.done?.ok) return;
  const now = { code, options: opts, print: fingerprint(state.trace), trace: state.trace };
  status.notes(unchangedNotes(state.last, now));
  state.last = now;
}

function setShare(traceId) {
  state.traceId = traceId;
  $("share").disabled = !traceId;
  const link = $("permalink");
  link.hidden = !traceId || !state.permalink;
  link.value = traceId ? permalinkUrl(traceId) : "";
  const inductor = $("diff-inductor");
  const logged = rebuiltFrom(state.trace);  // a rebuilt graph: against the log's Inductor
  inductor.hidden = !traceId || !(inductorOf(state.trace) || logged);
  inductor.href = traceId ? `/diff/${traceId}/${logged ? encodeURIComponent(logged.trace)
    : "inductor"}` : "#";
  const previous = $("diff-previous");
  previous.hidden = !traceId || !state.before || state.before === traceId;
  previous.href = previous.hidden ? "#" : `/diff/${state.before}/${traceId}`;
}

const permalinkUrl = (id) => new URL(`/t/${id}`, location.origin).href;

async function share() {
  if (!state.traceId) return;
  const url = permalinkUrl(state.traceId);
  const link = $("permalink");
  link.value = url;
  link.hidden = false;
  let copied = false;
  try {
    await navigator.clipboard.writeText(url);
    copied = true;
  } catch {
    link.select();
    copied = document.execCommand?.("copy") ?? false;
  }
  toast(copied ? `Link copied: ${url}` : `Permalink: ${url}`);
}

function setReadOnly(flag) {
  editor.setReadOnly(flag);
  for (const el of /** @type {NodeListOf<HTMLInputElement>} */ (
    document.querySelectorAll(".options select, .options input"))) el.disabled = flag;
  optionControls.setDisabled(flag);
  $("samples").disabled = flag;
  $("compile").hidden = flag;
  $("edit-copy").hidden = !flag;
}

async function openPermalink(id, fetched = null) {
  state.permalink = id;
  document.body.classList.add("permalink");
  setReadOnly(true);
  reset();
  let trace;
  try {
    trace = await (fetched ?? getTrace(id, { split: true }));
  } catch (err) {
    if (err.status === 404) return notFound(`No stored trace has the id “${id}”.`);
    banner.show({ kind: err.kind ?? "client", message: err.message });
    return;
  }
  // The page's own setup, the editor's text and the panes each in a task of their own: a
  // trace that arrived before the page's modules ran would make them one long task.
  await nextTask();
  editor.code = trace.code ?? "";
  setOptions(trace.options);
  $("permalink-info").textContent = `Read-only trace ${trace.id ?? id}` +
    `${trace.ok === false ? " (failed compile)" : ""}` +
    `${trace.created ? ` · created ${new Date(trace.created).toLocaleString()}` : ""}`;
  await openFirstGraph(id, trace, fetched ? firstPart : null);
  await nextTask();
  handleAll(trace.events ?? [], false);
  // CodeMirror after the code pane has painted: preloaded, its import would end at once, and
  // its evaluation and first text (the GPT-2 step's 465 ms task at load 15) came before the
  // frame that shows the code.
  await afterFrame();
  editor.load();
  const source = state.trace.data("source");
  if (source) setOptions({ device: source.device, backend: source.backend, ...source.options });
  setShare(trace.id ?? id);
  state.trace.followUps = trace.follow_ups ?? {};
  watchFollowUps();
  runPanel.show(trace, source, (await getHealth().catch(() => null))?.versions ?? null,
    state.trace.data("capture"), state.trace);
}

// A big stored trace (its head, each graph a part): it opens on its first graph, whose part
// is asked for before the panes draw; another graph's part comes when its tab is shown.
async function openFirstGraph(id, stored, early = null) {
  if (!Object.keys(stored.parts ?? {}).length) return;
  state.trace.stored = id;
  const first = (stored.events ?? []).find((e) => e.stage === "capture")?.data?.graphs?.[0];
  if (!first) return;
  state.graphs = [first.id];
  if (!isStub(first)) return;
  try {
    const part = (first.part === "g0" ? await early : null) ?? await getPart(id, first.part);
    mergePart(stored.events, part);
  } catch (err) {
    banner.show({ kind: err.kind ?? "client", message: `cannot load the graph: ${err.message}` });
  }
}

// `done` came, and the permalink with it, while a follow-up (Inductor) still runs on the
// server: ask for what it has stored every FOLLOW_UP_POLL_MS until nothing is running,
// showing each event as it arrives. A new compile or trace ends the watch.
const FOLLOW_UP_POLL_MS = 1000;
async function watchFollowUps() {
  const watch = state.watch;
  const trace = state.trace;
  const id = trace.traceId;
  const show = () => {
    status.followUps(trace);
    tabs.update(graphView(trace, state.graphs), "inductor");
  };
  show();
  while (id && watch === state.watch && followUpsPending(trace)) {
    await new Promise((resolve) => setTimeout(resolve, FOLLOW_UP_POLL_MS));
    if (watch !== state.watch) return;
    let answer;
    try {
      answer = await getFollowUps(id);
    } catch (err) {
      console.warn("follow-ups", err);
      continue;
    }
    if (watch !== state.watch) return;
    trace.followUps = answer.follow_ups ?? {};
    handleAll(answer.events ?? [], false);
    show();
  }
  setShare(state.traceId);  // the Inductor diff link, once its event is here
}

// A logged graph of a TORCH_TRACE log's trace, rebuilt as a snippet by the server
// (compiler/trace/rebuild.py) and compiled as any pasted snippet is: a sandboxed job.
async function rebuildGraph(traceId, graph) {
  let answer;
  try {
    answer = await getRebuild(traceId, graph);
  } catch (err) {
    toast(`Graph ${graph} cannot be rebuilt: ${err.message}`);
    return;
  }
  editCopy();
  editor.code = answer.code;
  await compile();
}

function editCopy() {
  state.permalink = null;
  document.body.classList.remove("permalink");
  setReadOnly(false);
  $("permalink").hidden = true;
  history.pushState({}, "", "/");
}

const sampleCode = new Map();

async function loadSamples() {
  let samples = [];
  try {
    const answer = await getSamples();
    samples = Array.isArray(answer) ? answer : answer?.samples ?? [];
  } catch (err) {
    console.warn("no samples", err);
  }
  const select = $("samples");
  for (const s of samples) {
    select.append(new Option(s.title || s.name, s.name));
    sampleCode.set(s.name, s.code);
  }
  select.addEventListener("change", () => {
    const sample = samples.find((s) => s.name === select.value);
    if (sample) editor.code = sample.code;
  });
  return samples;
}

async function showHealth() {
  const el = $("server-status");
  try {
    const health = await getHealth();
    el.className = "server ok";
    const devices = health.devices ?? {};
    const gpu = devices.gpu ?? (devices.cuda ? "cuda" : null);
    el.title = [health.isolation && `isolation: ${health.isolation}`, gpu && `GPU: ${gpu}`,
      health.versions?.torch && `torch ${health.versions.torch}`].filter(Boolean).join(" · ")
      || "server is up";
    el.textContent = gpu ? `server · ${gpu}` : "server · cpu only";
    if (devices.cuda === false) {
      /** @type {HTMLOptionElement} */
      const cuda = $("opt-device").querySelector("option[value=cuda]");
      cuda.disabled = true;
      cuda.title = "this server has no GPU";
    }
  } catch {
    el.className = "server bad";
    el.textContent = "server unreachable";
  }
}

$("compile").addEventListener("click", () => compile());
$("share").addEventListener("click", () => share());
$("edit-copy").addEventListener("click", () => editCopy());

async function boot() {
  showHealth();
  const diff = location.pathname.match(/^\/diff\/([^/]+)\/([^/]+)\/?$/);
  if (diff) {
    const { openDiff } = await import("./diffpage.js");
    await openDiff(decodeURIComponent(diff[1]), decodeURIComponent(diff[2]), ctx);
    document.body.dataset.ready = "true";
    return;
  }
  const match = location.pathname.match(/^\/t\/([^/]+)\/?$/);
  const [samples, specs] = await Promise.all([loadSamples(), optionControls.load()]);
  fillChoices($("opt-backend"), specs.find((s) => s.name === "backend"));
  if (match) {
    await openPermalink(decodeURIComponent(match[1]), fetching);
  } else if (location.pathname !== "/" && location.pathname !== "/index.html") {
    notFound(`There is no page at ${location.pathname}.`);
  } else if (samples.length) {
    const first = samples.find((s) => s.name === "gelu_tanh") ?? samples[0];
    $("samples").value = first.name;
    editor.code = first.code;
  }
  loadCytoscape().catch((err) => console.error("cytoscape failed to load", err));
  await editor.load();
  document.body.dataset.ready = "true";
  // Every tab's module once the page is idle (the shown tab drawn): a first show need not
  // wait for the network.
  const prefetch = () => tabPanes.forEach((pane) => pane.prefetch().catch(() => {}));
  if (typeof requestIdleCallback === "function") requestIdleCallback(prefetch, { timeout: 3000 });
  else setTimeout(prefetch, 1000);
}

window.kernelscope = { state, bus, editor, get panes() { return panes(); }, libInfo, compile,
  cancel, openPermalink, showGraphs };
boot();
