// Output pane: what the user's snippet printed (the `stdout` of each stage's event), with
// the stage it printed in. The compiler's own report never mixes with it.

import { h, clear, empty } from "../dom.js";
import { Pane } from "./pane.js";

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

  update(trace, stage) {
    if (stage !== "done" && !trace.data(stage)?.stdout) return;
    const printed = trace.events.filter((e) => e.data?.stdout);
    if (!printed.length) {
      if (stage === "done") clear(this.el, empty("The snippet printed nothing."));
      return;
    }
    clear(this.el, printed.map((e) => h("section",
      h("h3", `while ${e.stage} ran`),
      h("pre.stdout", e.data.stdout))));
    this.setFilled(true);
  }
}
