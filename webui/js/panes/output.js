// Output pane: what the user's snippet printed (the `stdout` of each stage's event), with
// the stage it printed in. The compiler's own report never mixes with it.

import { h, clear, empty } from "../dom.js";
import { Pane } from "./pane.js";

/** @typedef {import("../trace.js").Trace} Trace */
/** @typedef {import("../../types/events").StageName} StageName */

export class OutputPane extends Pane {
  id = "output";
  title = "Output";

  constructor(ctx) {
    super(ctx, "div.pane-body.output-pane");
    this.reset();
  }

  reset() {
    this.setFilled(false);
    clear(this.el, empty("What the snippet prints appears here."));
  }

  /** @param {Trace} trace @param {StageName} stage */
  update(trace, stage) {
    if (stage !== "done" && !stdoutOf(trace.data(stage))) return;
    const printed = trace.events.filter((e) => stdoutOf(e.data));
    if (!printed.length) {
      if (stage === "done") clear(this.el, empty("The snippet printed nothing."));
      return;
    }
    clear(this.el, printed.map((e) => h("section",
      h("h3", `while ${e.stage} ran`),
      h("pre.stdout", stdoutOf(e.data)))));
    this.setFilled(true);
  }
}

// What the snippet printed while a stage ran (the stages that carry `stdout`), or "".
/** @param {import("../../types/events").Payloads[StageName] | null} data */
const stdoutOf = (data) => (data && "stdout" in data ? data.stdout : "");
