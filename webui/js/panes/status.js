// The status strip: one chip per pipeline stage, filled in with its wall time as its event
// arrives, the running stage animated, a failed stage red; and one line about the source
// (entry, inputs, device, backend, versions).

import { h, clear, fmtMs, shape } from "../dom.js";
import { STAGES } from "../trace.js";

export class StatusStrip {
  constructor() {
    this.chips = new Map(STAGES.map((s) => [s, h("span.stage", { dataset: { stage: s } },
      h("span.dot"), h("span.sname", s), h("span.sms"))]));
    this.total = h("span.total");
    this.info = h("div.source-info");
    this.el = h("div.status", h("div.stages", [...this.chips.values()], this.total), this.info);
    this.reset();
  }

  reset() {
    for (const chip of this.chips.values()) {
      chip.className = "stage";
      chip.querySelector(".sms").textContent = "";
    }
    this.total.textContent = "";
    clear(this.info);
  }

  // Marks the first stage as running when a job starts.
  start() {
    this.reset();
    this.chips.get(STAGES[0]).classList.add("running");
  }

  update(trace, event, live) {
    const chip = this.chips.get(event.stage);
    if (chip) {
      chip.className = "stage done";
      chip.querySelector(".sms").textContent = fmtMs(event.ms);
      const next = this.chips.get(STAGES[STAGES.indexOf(event.stage) + 1]);
      if (next && live) next.classList.add("running");
    }
    if (event.stage === "error") {
      for (const c of this.chips.values()) c.classList.remove("running");
      this.chips.get(event.data.stage)?.classList.add("failed");
    }
    if (event.stage === "done") {
      for (const c of this.chips.values()) c.classList.remove("running");
      const total = STAGES.reduce((n, s) => n + (trace.ms(s) ?? 0), 0);
      this.total.textContent = `${event.data.ok === false ? "failed" : "done"} · ${fmtMs(total)}`;
      this.total.className = `total ${event.data.ok === false ? "bad" : "ok"}`;
    }
    if (event.stage === "source") this.sourceInfo(event.data);
  }

  sourceInfo(s) {
    const inputs = (s.inputs ?? []).map((i) => `${i.name}: ${i.dtype}${shape(i.shape)}`).join(", ");
    const v = s.versions ?? {};
    const versions = ["torch", "triton", "python"].filter((k) => v[k]).map((k) => `${k} ${v[k]}`);
    clear(this.info,
      h("code", `${s.entry ?? "?"}(${inputs})`),
      h("span", `${s.device}${v.gpu ? ` (${v.gpu})` : ""}`),
      h("span", `${s.backend}${s.triton_interpret ? " (interpreter)" : ""}`),
      h("span.dim", versions.join(" · ")));
  }
}
