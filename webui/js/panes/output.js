// Output pane: what the user's snippet printed (the `stdout` of each stage's event), with
// the stage it printed in. The compiler's own report never mixes with it.

import { h, clear, empty } from "../dom.js";
import { Pane } from "./pane.js";

/** @typedef {import("../trace.js").Trace} Trace */
/** @typedef {import("../../types/events").StageName} StageName */

export class OutputPane extends Pane {
  id = "output";
  title = "Output";
  // The stages whose payload carries the snippet's `stdout`, and `done` (nothing printed).
  stages = ["source", "capture", "done"];
  placeholder = "What the snippet prints appears here.";

  constructor(ctx) {
    super(ctx, "div.pane-body.output-pane");
    this.reset();
  }

  /** @param {Trace} trace @param {StageName} stage */
  handles(trace, stage) {
    return stage === "done" || (this.stages.includes(stage) && !!stdoutOf(trace.data(stage)));
  }

  /** @param {Trace} trace */
  render(trace) {
    const printed = trace.events.filter((e) => stdoutOf(e.data));
    if (!printed.length) {
      clear(this.el, empty("The snippet printed nothing."));
      return false;
    }
    clear(this.el, printed.map((e) => h("section",
      h("h3", `while ${e.stage} ran`),
      h("pre.stdout", stdoutOf(e.data)))));
    return true;
  }
}

// What the snippet printed while a stage ran (the stages that carry `stdout`), or "".
/** @param {import("../../types/events").Payloads[StageName] | null} data */
const stdoutOf = (data) => (data && "stdout" in data ? data.stdout : "");
