// The status strip: one chip per pipeline stage, filled in with its wall time as its event
// arrives, the running stage animated, a failed stage red; the wall time from the click to
// `done` next to the sum of the stage times; Cancel while a job runs; a stale marker after
// an edit; notes about options that changed nothing; and one line about the source
// (entry, inputs, device, backend, versions).

import { h, clear, fmtMs, shape } from "../dom.js";
import { STAGES, FOLLOW_UPS, followUpState } from "../trace.js";
import { SNIPPET_TITLE } from "./errors.js";

/** @typedef {import("../trace.js").Trace} Trace */
/** @typedef {import("../../types/events").StageEvent} StageEvent */
/** @typedef {import("../../types/events").StageName} StageName */

export class StatusStrip {
  constructor({ onCancel = () => {} } = {}) {
    this.stagesEl = h("div.stages");
    this.total = h("span.total");
    this.cancelButton = h("button.cancel", { type: "button", hidden: true,
      title: "Stop this compile (the server kills its worker)", onclick: () => onCancel() }, "Cancel");
    this.staleEl = h("span.stale-note", { hidden: true,
      title: "The code changed after this compile; its line numbers no longer match" },
      "edited since this compile · provenance off · Ctrl+Enter recompiles");
    this.info = h("div.source-info");
    this.notesEl = h("div.option-notes");
    this.pendingEl = h("span.follow-ups", { hidden: true });
    this.el = h("div.status", this.stagesEl, this.total, this.pendingEl, this.cancelButton,
      this.staleEl, this.info, this.notesEl);
    this.t0 = null;
    this.timer = null;
    this.rebuild();
  }

  // The chips for the current stage list (the server's schema may change it), then one
  // per follow-up (Inductor), shown only for a compile that asked for it.
  rebuild() {
    this.order = [...STAGES, ...FOLLOW_UPS];
    this.chips = new Map(this.order.map((s) => [s, h("span.stage", { dataset: { stage: s } },
      h("span.dot"), h("span.sname", s), h("span.sms"))]));
    clear(this.stagesEl, [...this.chips.values()]);
    this.reset();
  }

  reset() {
    for (const [stage, chip] of this.chips) {
      chip.className = "stage";
      chip.querySelector(".sms").textContent = "";
      chip.hidden = FOLLOW_UPS.includes(stage);
    }
    this.stopClock();
    this.t0 = null;
    this.total.textContent = "";
    this.total.className = "total";
    this.pendingEl.hidden = true;
    clear(this.info);
    clear(this.notesEl);
  }

  // Marks the first stage as running when a job starts, and starts the wall clock.
  start() {
    this.reset();
    this.t0 = performance.now();
    this.chips.get(STAGES[0])?.classList.add("running");
    this.waitingFor = null;
    this.timer = setInterval(() => this.tick(), 100);
  }

  // The clock, and while the server says the job waits (a `waiting` event: no free slot,
  // or its worker still warming up), what it waits on; while a long stage runs (a
  // `progress` event), what it is doing.
  tick() {
    this.total.textContent = `${this.waitingFor ?? "running"} · ${fmtSeconds(performance.now() - this.t0)}`;
  }

  running(flag) {
    this.cancelButton.hidden = !flag;
  }

  stopClock() {
    clearInterval(this.timer);
    this.timer = null;
  }

  // The request itself was refused (a 400, 413, 429 or no server): no event will come, so
  // the clock stops here.
  refused() {
    this.stopClock();
    for (const c of this.chips.values()) c.classList.remove("running");
    this.total.textContent = `refused after ${fmtSeconds(performance.now() - (this.t0 ?? performance.now()))}`;
    this.total.className = "total bad";
  }

  cancelled() {
    this.stopClock();
    for (const c of this.chips.values()) c.classList.remove("running");
    this.total.textContent = `cancelled after ${fmtSeconds(performance.now() - (this.t0 ?? performance.now()))}`;
    this.total.className = "total bad";
  }

  setStale(flag) {
    this.staleEl.hidden = !flag;
  }

  notes(list) {
    clear(this.notesEl, list.map((n) => h("div.option-note", n)));
  }

  /** @param {Trace} trace @param {StageEvent} event */
  update(trace, event, live) {
    const chip = this.chips.get(event.stage);
    this.waitingFor = event.stage === "waiting" || event.stage === "progress"
      ? event.data.message : null;
    if (live && this.timer !== null) this.tick();
    if (event.stage === "source") {
      for (const s of FOLLOW_UPS) this.chips.get(s).hidden = !event.data.options?.[s];
    }
    if (event.stage === "capture_graph") {  // capture goes on: how many graphs so far
      const n = trace.graphs("capture").length;
      this.chips.get("capture")?.querySelector(".sms").replaceChildren(`${n} graph${n === 1 ? "" : "s"}`);
    }
    if (chip) {
      // A stage the snippet's own process reported (source, capture) is marked as such.
      chip.className = event.origin === "snippet" ? "stage done snippet-origin" : "stage done";
      chip.title = event.origin === "snippet" ? SNIPPET_TITLE : "";
      chip.querySelector(".sms").textContent = fmtMs(event.ms);
      const next = this.order.slice(this.order.indexOf(event.stage) + 1)
        .map((s) => this.chips.get(s)).find((c) => !c.hidden);
      if (next && live) next.classList.add("running");
    }
    if (event.stage === "error") {
      for (const c of this.chips.values()) c.classList.remove("running");
      this.chips.get(/** @type {StageName} */ (event.data.stage))?.classList.add("failed");
    }
    if (event.stage === "done") this.finish(trace, event, live);
    if (event.stage === "source") this.sourceInfo(event.data, event.origin ?? null);
  }

  // "done · 1.43 s wall (stages 1.14 s)": the wall time is what the user waited, measured
  // here from the click (or reported by the server); the stage sum is the compiler's work.
  /** @param {Trace} trace @param {import("../../types/events").EventOf<"done">} event */
  finish(trace, event, live) {
    this.stopClock();
    for (const c of this.chips.values()) c.classList.remove("running");
    const ok = event.data.ok !== false;
    const sum = this.order.reduce((n, s) => n + (trace.ms(s) ?? 0), 0);
    const wallMs = live && this.t0 !== null ? performance.now() - this.t0 : event.data.wall_ms ?? null;
    const failedIn = trace.error?.stage;
    const parts = [ok ? "done" : failedIn ? `failed in ${failedIn}` : "failed"];
    if (wallMs !== null) parts.push(`${fmtSeconds(wallMs)} wall`);
    if (sum > 0) parts.push(`stages ${fmtMs(sum)}`);
    this.total.textContent = parts.join(" · ");
    this.total.title = "wall: from the click to the last event; stages: the sum of the compiler's stage times";
    this.total.className = `total ${ok ? "ok" : "bad"}`;
    this.followUps(trace);
  }

  // The follow-ups `done` left running (Inductor): their chips and one line saying so;
  // called again whenever the server says more of them.
  /** @param {Trace} trace */
  followUps(trace) {
    const states = FOLLOW_UPS.map((s) => [s, followUpState(trace, s)])
      .filter(([, state]) => state !== null);
    for (const [stage, state] of states) {
      const chip = this.chips.get(/** @type {StageName} */ (stage));
      if (chip) chip.hidden = false;  // a follow-up no option names (gpu_stages) shows here
      chip?.classList.toggle("running", state === "running");
      chip?.classList.toggle("failed", state === "lost");
    }
    const running = states.filter(([, state]) => state === "running").map(([s]) => s);
    const lost = states.filter(([, state]) => state === "lost").map(([s]) => s);
    this.pendingEl.hidden = !running.length && !lost.length;
    this.pendingEl.dataset.state = running.length ? "running" : "lost";
    this.pendingEl.textContent = running.length
      ? `${running.join(", ")} still running · added to this trace when it ends`
      : `${lost.join(", ")} did not finish`;
  }

  // A cold job's first `source` is the server's, from the snippet text, sent while the
  // worker imports torch: the entry and inputs come with the worker's own `source`.
  /** @param {import("../../types/events").Source} s @param {string | null} origin */
  sourceInfo(s, origin = null) {
    if (origin === "server") {
      clear(this.info, h("span.starting", "starting a worker (importing torch) · the entry " +
        "and its inputs come once the snippet has run"),
      h("span", s.device), h("span", s.backend));
      return;
    }
    const inputs = (s.inputs ?? []).map((i) => `${i.name}: ${i.dtype}${shape(i.shape)}`).join(", ");
    /** @type {Partial<import("../../types/events").Versions>} */
    const v = s.versions ?? {};
    const versions = ["torch", "triton", "python"].filter((k) => v[k]).map((k) => `${k} ${v[k]}`);
    clear(this.info,
      h("code", `${s.entry ?? "?"}(${inputs})`),
      h("span", `${s.device}${v.gpu ? ` (${v.gpu})` : ""}`),
      h("span", `${s.backend}${s.triton_interpret ? " (interpreter)" : ""}`),
      h("span.dim", versions.join(" · ")));
  }
}

const fmtSeconds = (ms) => `${(ms / 1000).toFixed(2)} s`;
