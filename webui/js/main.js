// Boots the explorer: the editor and options on the left, the generated code in the
// middle, the analysis panes in tabs on the right. Compiling streams a job's events into a
// Trace and hands each one to every pane; a permalink (/t/<id>) replays a stored trace the
// same way, read-only. Provenance selections travel through one SelectionBus.

import { getSamples, getHealth, getSchema, getTrace, startCompile, jobEvents } from "./api.js";
import { Editor } from "./editor.js";
import { loadCytoscape, libInfo } from "./libs.js";
import { Trace, loadStages } from "./trace.js";
import { SelectionBus, buildIndex, fromSourceLine, isEmpty } from "./provenance.js";
import { makeTabs, makeSplitter, toast } from "./layout.js";
import { StatusStrip } from "./panes/status.js";
import { ErrorBanner } from "./panes/errors.js";
import { CodePane } from "./panes/code.js";
import { GraphPane } from "./panes/graph.js";
import { IrPane } from "./panes/ir.js";
import { FusionPane } from "./panes/fusion.js";
import { MemoryPane } from "./panes/memory.js";
import { TimingsPane } from "./panes/timings.js";

await loadStages(getSchema); // before any pane is built: they lay out one chip per stage
const $ = (id) => document.getElementById(id);

const state = { trace: new Trace(), index: null, running: false, permalink: null };
state.index = buildIndex(state.trace);
const bus = new SelectionBus();

const ctx = {
  index: () => state.index,
  current: () => bus.current,
  hover: (sel) => bus.hover(sel),
  unhover: () => bus.unhover(),
  pin: (sel) => bus.pin(sel),
  clearPin: () => bus.clear(),
  kernelColour: (gid, name) => state.index.kernelColour.get(`${gid}:${name}`) ?? "#3a4256",
  cytoscape: loadCytoscape,
};

const editor = new Editor($("editor"), {
  onHoverLine: (line) => (line && state.index.sourceLines.has(line)
    ? bus.hover(fromSourceLine(state.index, line)) : bus.unhover()),
  onClickLine: (line) => {
    if (!line || !state.index.sourceLines.has(line)) return;
    const sel = fromSourceLine(state.index, line);
    bus.pin(sel);
    code.scrollToSelection();
    ir.scrollToSelection();
  },
  onRun: () => compile(),
});

const status = new StatusStrip();
const banner = new ErrorBanner({ onLine: (line) => editor.revealLine(line) });
$("status-host").append(status.el, banner.el);

const code = new CodePane(ctx);
const ir = new IrPane(ctx);
const tabPanes = [new GraphPane(ctx), ir, new FusionPane(ctx), new MemoryPane(ctx),
  new TimingsPane(ctx)];
const panes = [code, ...tabPanes];
code.el.dataset.pane = "code";
$("code-host").append(code.el);
const tabs = makeTabs($("tabs"), $("tab-host"), tabPanes, (pane) => pane.shown?.());

const workspace = document.querySelector(".workspace");
const reflow = () => tabPanes.forEach((p) => !p.el.hidden && p.shown?.());
makeSplitter($("split-1"), workspace, "--w-editor", { onResize: reflow });
makeSplitter($("split-2"), workspace, "--w-code", { onResize: reflow });
window.addEventListener("resize", reflow);

bus.subscribe((sel) => {
  editor.mark({ selected: sel.lines });
  for (const pane of panes) pane.select(sel);
  document.body.classList.toggle("selecting", !isEmpty(sel));
});
document.addEventListener("keydown", (e) => { if (e.key === "Escape") bus.clear(); });

function options() {
  return { device: $("opt-device").value, backend: $("opt-backend").value,
    fusion: $("opt-fusion").checked, inductor: $("opt-inductor").checked };
}

// Sets the option controls; values the controls do not offer (backend "auto") are skipped.
function setOptions(opts = {}) {
  for (const [id, value] of [["opt-device", opts.device], ["opt-backend", opts.backend]]) {
    const select = $(id);
    if (value && [...select.options].some((o) => o.value === value)) select.value = value;
  }
  if (opts.fusion !== undefined) $("opt-fusion").checked = !!opts.fusion;
  if (opts.inductor !== undefined) $("opt-inductor").checked = !!opts.inductor;
}

function reset() {
  state.trace = new Trace();
  state.index = buildIndex(state.trace);
  bus.clear();
  banner.reset();
  status.reset();
  editor.mark({ lines: new Set(), selected: new Set(), error: null, breaks: new Set() });
  for (const pane of panes) pane.reset();
  tabs.refresh();
  setShare(null);
}

function handle(event, live) {
  const trace = state.trace;
  if (!trace.add(event)) return;
  state.index = buildIndex(trace);
  status.update(trace, event, live);
  if (event.stage === "error") {
    banner.show(event.data);
    editor.mark({ error: event.data.line ?? null });
  }
  if (event.stage === "done") setShare(event.data.trace_id ?? null);
  if (event.stage === "capture") {
    editor.mark({ breaks: new Set((event.data.graph_breaks ?? []).map((b) => b.line)) });
  }
  for (const pane of panes) pane.update(trace, event.stage);
  editor.mark({ lines: state.index.sourceLines });
  bus.emit();
  tabs.refresh();
}

async function compile() {
  if (state.running || state.permalink) return;
  state.running = true;
  document.body.classList.add("running");
  $("compile").disabled = true;
  reset();
  status.start();
  try {
    const { job_id: jobId } = await startCompile(editor.code, options());
    for await (const event of jobEvents(jobId)) handle(event, true);
  } catch (err) {
    console.error(err);
    status.update(state.trace, { stage: "error", data: { stage: null } }, false);
    banner.show({ kind: err.kind ?? "client", message: err.message });
  } finally {
    state.running = false;
    document.body.classList.remove("running");
    $("compile").disabled = false;
  }
}

function setShare(traceId) {
  state.traceId = traceId;
  $("share").disabled = !traceId;
  const link = $("permalink");
  link.hidden = !traceId || !state.permalink;
  link.value = traceId ? permalinkUrl(traceId) : "";
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

async function openPermalink(id) {
  state.permalink = id;
  document.body.classList.add("permalink");
  editor.setReadOnly(true);
  for (const el of document.querySelectorAll(".options select, .options input")) el.disabled = true;
  $("samples").disabled = true;
  $("compile").hidden = true;
  $("edit-copy").hidden = false;
  reset();
  try {
    const trace = await getTrace(id);
    editor.code = trace.code ?? "";
    setOptions(trace.options);
    $("permalink-info").textContent =
      `Read-only trace ${trace.id ?? id}${trace.created ? ` · created ${new Date(trace.created).toLocaleString()}` : ""}`;
    for (const event of trace.events ?? []) handle(event, false);
    const source = state.trace.data("source");
    if (source) setOptions({ device: source.device, backend: source.backend });
    setShare(trace.id ?? id);
  } catch (err) {
    banner.show({ kind: err.status === 404 ? "not found" : err.kind ?? "client",
      message: err.status === 404 ? `No stored trace has the id ${id}.` : err.message });
  }
}

function editCopy() {
  state.permalink = null;
  document.body.classList.remove("permalink");
  editor.setReadOnly(false);
  for (const el of document.querySelectorAll(".options select, .options input")) el.disabled = false;
  $("samples").disabled = false;
  $("compile").hidden = false;
  $("edit-copy").hidden = true;
  $("permalink").hidden = true;
  history.pushState({}, "", "/");
}

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
$("opt-device").addEventListener("change", () => {
  $("opt-backend").value = $("opt-device").value === "cuda" ? "triton" : "cpp";
});

async function boot() {
  showHealth();
  const match = location.pathname.match(/^\/t\/([^/]+)\/?$/);
  const samples = await loadSamples();
  if (match) {
    await openPermalink(decodeURIComponent(match[1]));
  } else if (samples.length) {
    const first = samples.find((s) => s.name === "gelu_tanh") ?? samples[0];
    $("samples").value = first.name;
    editor.code = first.code;
  }
  loadCytoscape().catch((err) => console.error("cytoscape failed to load", err));
  document.body.dataset.ready = "true";
}

window.kernelscope = { state, bus, editor, panes, libInfo, compile, openPermalink };
boot();
