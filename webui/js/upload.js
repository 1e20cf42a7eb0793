// Your own run in the explorer (docs/own-run.md): "Open run…" uploads a trace folder's
// .json files (what `kernelscope run` or options={"trace_dir"} wrote) to POST /api/traces and
// opens the stored trace's permalink; a refusal is the server's reason, in the banner.
// On any stored trace, the run panel says what was recorded (options.recorded) and, when
// the versions that made the trace differ from this server's, names both.

import { logSection } from "./logpanel.js";
import { distributedSection, ranksLine } from "./distributed.js";
import { h, clear } from "./dom.js";
import { uploadTrace } from "./api.js";

export const MAX_FILES = 1000; // as the server (compiler/trace/reader.py)
export const MAX_BYTES = 32 << 20; // the server's default UPLOAD_LIMIT_MB
const VERSION_KEYS = ["python", "torch", "triton", "kernelscope"];

// The control: a button in the top bar and the folder picker behind it (a trace folder is
// what a run leaves); .json files dropped on the button open the same way.
export function mountUpload(before, { onError, onOpened = (url) => location.assign(url) }) {
  const input = h("input", { id: "open-run-files", type: "file", multiple: true,
    webkitdirectory: true, hidden: true, "aria-label": "Trace folder" });
  const button = h("button", {
    id: "open-run",
    type: "button",
    title: "Open a recorded run of your own script: pick its trace folder (kernelscope run " +
      "script.py, or options={\"trace_dir\": ...}), or drop its .json files here; " +
      "a TORCH_TRACE folder or log of a stock torch.compile run opens too",
    onclick: () => input.click(),
  }, "Open run…");
  const open = async (picked) => {
    if (!picked.length) return;
    button.disabled = true;
    button.textContent = "Opening…";
    try {
      const answer = await uploadTrace(await readFiles(picked));
      onOpened(answer.url);
    } catch (err) {
      onError({ kind: "upload", stage: null, message: err.message });
    } finally {
      button.disabled = false;
      button.textContent = "Open run…";
    }
  };
  input.addEventListener("change", () => {
    const picked = [...input.files];
    input.value = "";
    open(picked);
  });
  button.addEventListener("dragover", (e) => e.preventDefault());
  button.addEventListener("drop", (e) => {
    e.preventDefault();
    open([...(e.dataTransfer?.files ?? [])]);
  });
  before.before(button, input);
  return { button, input };
}

// The picked files as the endpoint takes them; what the server would refuse for size is
// refused here without sending it.
async function readFiles(picked) {
  // The folder's own files: not its subfolders' (another run recorded inside it).
  const top = (f) => (f.webkitRelativePath || f.name).split("/").length <= 2;
  // One TORCH_TRACE log (a stock torch.compile run's, compiler/trace/torch_trace.py) opens too.
  const logs = picked.filter((f) => f.name.endsWith(".log") && top(f));
  const json = picked.filter((f) => f.name.endsWith(".json") && top(f));
  const files = json.length ? json : logs.slice(-1);
  if (!files.length) {
    throw new Error("no .json files among those picked: select the files of a trace folder " +
      "(or a TORCH_TRACE log)");
  }
  if (files.length > MAX_FILES) throw new Error(`${files.length} files, more than ${MAX_FILES}`);
  const bytes = files.reduce((n, f) => n + f.size, 0);
  if (bytes > MAX_BYTES) {
    throw new Error(`the files are ${(bytes / 2 ** 20).toFixed(1)} MiB together, more than ` +
      `${MAX_BYTES >> 20} MiB: use kernelscope open DIR on the server's machine`);
  }
  return Promise.all(files.map(async (f) => ({ name: f.name, text: await f.text() })));
}

// "Recorded with torch A; this server runs torch B" for every version that differs, or null.
// A version the recording could not know ("": a TORCH_TRACE log names torch's only) is no
// difference.
export function versionNotice(recorded, server) {
  if (!recorded || !server) return null;
  const differ = VERSION_KEYS.filter((k) => recorded[k] !== "" &&
    (recorded[k] ?? null) !== (server[k] ?? null));
  if (!differ.length) return null;
  const list = (v) => differ.map((k) => `${k} ${v[k] ?? "none"}`).join(", ");
  return `Recorded with ${list(recorded)}; this server runs ${list(server)}. ` +
    "Panes show what this version reads of it.";
}

// The run panel under the status strip: what an opened run holds, its notices, and the
// version notice (for any stored trace whose versions are not this server's).
export class RunPanel {
  // `onRebuild(traceId, graphId)`: compiles a logged graph of a TORCH_TRACE log's trace.
  constructor(onRebuild = null) {
    this.el = h("div.run-panel", { hidden: true });
    this.onRebuild = onRebuild;
  }

  reset() {
    this.el.hidden = true;
    this.last = null;
    clear(this.el);
  }

  // Drawn again once a big log's part (a compile's records) has come.
  refresh() {
    if (this.last && this.last[3]?.log) this.show(...this.last);
  }

  // `capture`: the capture event's data (a TORCH_TRACE log's trace has its `log`);
  // `model`: the Trace its events were read into (the distributed step's graphs).
  show(trace, source, serverVersions, capture = null, model = null) {
    this.last = [trace, source, serverVersions, capture, model];
    const run = trace?.options?.recorded ?? null;
    const versions = versionNotice(run?.versions ?? source?.versions, serverVersions);
    const rebuild = this.onRebuild && trace?.id ? (g) => this.onRebuild(trace.id, g) : null;
    const log = logSection(capture, rebuild);
    if (!run && !versions && !log) return this.reset();
    this.el.hidden = false;
    clear(this.el,
      log,
      run ? h("div.run-head", h("span.run-tag", "Recorded run"), summary(run)) : null,
      ranksLine(run),
      versions ? h("div.version-notice", { role: "status" }, versions) : null,
      run ? config(run.config ?? {}) : null,
      ...(run?.notices ?? []).map((n) => h("div.run-notice", n)),
      run?.dynamo?.length ? compiles(run.dynamo, run.calls ?? []) : null,
      run && model ? distributedSection(model) : null);
  }
}

function summary(run) {
  const file = run.file ? run.file.split("/").pop() : null;
  const parts = [`${run.graphs} graphs of ${run.compiles} Dynamo compiles`,
    `${run.recompiles} recompiles`, `${run.graph_breaks} graph breaks`];
  return h("span.run-summary", parts.join(" · "),
    file ? h("span", " from ", h("code", file)) : null,
    run.argv?.length ? h("span", " · ", h("code", `kernelscope run ${run.argv.join(" ")}`)) : null);
}

// The torch settings the script changed (Dynamo's and AOTAutograd's, off their defaults).
function config(changed) {
  const entries = Object.entries(changed);
  return h("div.run-config", "config: ", entries.length
    ? entries.map(([k, v], i) => [i ? ", " : "", h("code", `${k}=${v}`)])
    : h("span", "torch's defaults"));
}

// Each Dynamo compile: its id, where the call that compiled it was, the torch.compile call
// behind it, and the graph break that ended it.
function compiles(dynamo, calls) {
  const site = (s) => (s ? `${(s.file ?? "").split("/").pop()}:${s.line ?? "?"}` : "–");
  const rows = dynamo.map((d) => {
    const call = d.torch_compile != null ? calls.find((c) => c.call === d.torch_compile) : null;
    return h("tr", { dataset: { compile: d.compile_id } },
      h("td", h("code", d.compile_id), d.recompile ? h("span.run-re", " recompile") : null),
      h("td", { title: d.call_site?.code ?? "" }, site(d.call_site)),
      h("td", { title: call ? `backend ${call.backend}${call.mode ? `, mode ${call.mode}` : ""}` : "" },
        call ? site(call.site) : "–"),
      h("td", { title: d.graph_break ?? "" },
        d.graph_break ? `${site(d.graph_break_site)} ${d.graph_break}` : "–"));
  });
  return h("details.run-compiles", h("summary", `${dynamo.length} compiles`),
    h("table", h("tr", h("th", "compile"), h("th", "called at"), h("th", "torch.compile at"),
      h("th", "graph break")), rows));
}
